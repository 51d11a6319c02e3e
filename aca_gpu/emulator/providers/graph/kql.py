"""The KQL subset Resource Graph queries from acagpu use, and a clear refusal of anything else.

Supported: a table (`resources`, `resourcecontainers`) followed by `| where`, `| project`,
`| order by`, `| union (<pipeline>)`, `| limit`/`| take`. Predicates: `==`, `!=`, `=~`, `!~`,
`in`/`in~`/`!in`/`!in~` over a parenthesized list, `startswith`, `contains`, `has`, joined by `and`/`or`,
with parentheses. Terms: a column, `tags['k']` (also `tags.k`, `properties.x.y`), `tostring(x)`,
`tolower(x)`, a string literal. Anything else raises KqlError with the position, as Resource
Graph answers a query its parser rejects (HTTP 400, InvalidQuery / ParserFailure).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]
Tables = Callable[[str], list[Row]]
Expr = Callable[[Row], Any]

TABLES = ("resources", "resourcecontainers")
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<num>\d+)"
    r"|(?P<op>!in~|in~|=~|!~|==|!=|!in\b)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[|(),\[\].=]))"
)


class KqlError(ValueError):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    pos: int


def tokenize(text: str) -> list[Tok]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise KqlError(f"unexpected character {text[pos:].lstrip()[:1]!r}", pos)
        kind = m.lastgroup or "punct"
        value = m.group(kind)
        if kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append(Tok(kind, value, m.start(kind)))
        pos = m.end()
    out.append(Tok("end", "", len(text)))
    return out


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.i = 0

    # -- helpers ---------------------------------------------------------------------------------
    def peek(self) -> Tok:
        return self.toks[self.i]

    def take(self) -> Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, text: str) -> Tok:
        tok = self.take()
        if tok.text.lower() != text:
            raise KqlError(f"expected {text!r}, found {tok.text or 'end of query'!r}", tok.pos)
        return tok

    def at(self, *texts: str) -> bool:
        tok = self.peek()
        return tok.kind in ("word", "op", "punct") and tok.text.lower() in texts

    # -- grammar ---------------------------------------------------------------------------------
    def query(self) -> Callable[[Tables], list[Row]]:
        run = self.pipeline()
        if self.peek().kind != "end":
            tok = self.peek()
            raise KqlError(f"unexpected {tok.text!r}", tok.pos)
        return run

    def pipeline(self) -> Callable[[Tables], list[Row]]:
        tok = self.take()
        if tok.kind != "word" or tok.text.lower() not in TABLES:
            raise KqlError(f"unknown table {tok.text!r} (known: {', '.join(TABLES)})", tok.pos)
        table = tok.text.lower()
        stages: list[Callable[[list[Row], Tables], list[Row]]] = []
        while self.at("|"):
            self.take()
            stages.append(self.stage())

        def run(tables: Tables) -> list[Row]:
            rows = list(tables(table))
            for stage in stages:
                rows = stage(rows, tables)
            return rows

        return run

    def stage(self) -> Callable[[list[Row], Tables], list[Row]]:
        tok = self.take()
        op = tok.text.lower()
        if op == "where":
            pred = self.disjunction()
            return lambda rows, _t: [r for r in rows if _truthy(pred(r))]
        if op == "project":
            cols = self.projection()
            return lambda rows, _t: [{name: expr(r) for name, expr in cols} for r in rows]
        if op == "order" or op == "sort":
            self.expect("by")
            keys = self.order_keys()
            return lambda rows, _t: _ordered(rows, keys)
        if op in ("limit", "take"):
            num = self.take()
            if num.kind != "num":
                raise KqlError("expected a row count", num.pos)
            n = int(num.text)
            return lambda rows, _t: rows[:n]
        if op == "union":
            self.expect("(")
            sub = self.pipeline()
            self.expect(")")
            return lambda rows, tables: rows + sub(tables)
        raise KqlError(f"operator {tok.text!r} is not supported by this emulator", tok.pos)

    def projection(self) -> list[tuple[str, Expr]]:
        cols: list[tuple[str, Expr]] = []
        while True:
            tok = self.peek()
            if tok.kind == "word" and self.toks[self.i + 1].text == "=":
                self.i += 2
                cols.append((tok.text, self.term()))
            else:
                expr = self.term()
                if tok.kind != "word":
                    raise KqlError("a computed column needs a name (name = expression)", tok.pos)
                cols.append((tok.text, expr))
            if not self.at(","):
                return cols
            self.take()

    def order_keys(self) -> list[tuple[Expr, bool]]:
        keys = []
        while True:
            expr = self.term()
            descending = True  # KQL sorts descending unless told otherwise
            if self.at("asc", "desc"):
                descending = self.take().text.lower() == "desc"
            keys.append((expr, descending))
            if not self.at(","):
                return keys
            self.take()

    def disjunction(self) -> Expr:
        left = self.conjunction()
        while self.at("or"):
            self.take()
            left = _either(left, self.conjunction())
        return left

    def conjunction(self) -> Expr:
        left = self.comparison()
        while self.at("and"):
            self.take()
            left = _both(left, self.comparison())
        return left

    def comparison(self) -> Expr:
        if self.at("("):
            self.take()
            inner = self.disjunction()
            self.expect(")")
            return inner
        left = self.term()
        tok = self.peek()
        op = tok.text.lower()
        if op in ("in", "in~", "!in", "!in~"):
            self.take()
            values = self.string_list()
            fold = op.endswith("~")
            wanted = {_fold(v, fold) for v in values}
            negate = op.startswith("!")
            return lambda r: (_fold(_text(left(r)), fold) in wanted) != negate
        if op in ("==", "!=", "=~", "!~", "startswith", "contains", "has"):
            self.take()
            right = self.term()
            test = _COMPARE[op]
            return lambda r: test(_text(left(r)), _text(right(r)))
        raise KqlError(f"expected a comparison, found {tok.text or 'end of query'!r}", tok.pos)

    def string_list(self) -> list[str]:
        self.expect("(")
        values = []
        while True:
            tok = self.take()
            if tok.kind != "str":
                raise KqlError("expected a string literal", tok.pos)
            values.append(tok.text)
            if self.at(")"):
                self.take()
                return values
            self.expect(",")

    def term(self) -> Expr:
        tok = self.take()
        if tok.kind == "str":
            return _constant(tok.text)
        if tok.kind != "word":
            raise KqlError(f"expected a column or a string, found {tok.text or 'end of query'!r}", tok.pos)
        name = tok.text
        if name.lower() in ("tostring", "tolower") and self.at("("):
            self.take()
            inner = self.term()
            self.expect(")")
            if name.lower() == "tolower":
                return lambda r: _text(inner(r)).lower()
            return lambda r: _text(inner(r))
        path: list[str] = [name]
        while self.at("[", "."):
            if self.take().text == "[":
                key = self.take()
                if key.kind != "str":
                    raise KqlError("expected a quoted key", key.pos)
                self.expect("]")
                path.append(key.text)
            else:
                key = self.take()
                if key.kind != "word":
                    raise KqlError("expected a property name", key.pos)
                path.append(key.text)
        return lambda r: _lookup(r, path)


def _either(a: Expr, b: Expr) -> Expr:
    return lambda r: _truthy(a(r)) or _truthy(b(r))


def _both(a: Expr, b: Expr) -> Expr:
    return lambda r: _truthy(a(r)) and _truthy(b(r))


def _constant(value: str) -> Expr:
    return lambda r: value


def _lookup(row: Row, path: list[str]) -> Any:
    value: Any = row
    for i, key in enumerate(path):
        if not isinstance(value, dict):
            return None
        # column names are case-insensitive in KQL; tag keys and property names are not
        if i == 0:
            value = next((v for k, v in value.items() if k.lower() == key.lower()), None)
        else:
            value = value.get(key)
    return value


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _fold(value: str, fold: bool) -> str:
    return value.lower() if fold else value


def _truthy(value: Any) -> bool:
    return bool(value)


_COMPARE: dict[str, Callable[[str, str], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "=~": lambda a, b: a.lower() == b.lower(),
    "!~": lambda a, b: a.lower() != b.lower(),
    "startswith": lambda a, b: a.lower().startswith(b.lower()),
    "contains": lambda a, b: b.lower() in a.lower(),
    "has": lambda a, b: b.lower() in re.split(r"[^0-9a-z]+", a.lower()),
}


def _ordered(rows: list[Row], keys: Iterable[tuple[Expr, bool]]) -> list[Row]:
    out = list(rows)
    for expr, descending in reversed(list(keys)):
        out.sort(key=lambda r, e=expr: _text(e(r)), reverse=descending)  # type: ignore[misc]
    return out


def compile_query(text: str) -> Callable[[Tables], list[Row]]:
    """The query as a function of the tables, or KqlError."""
    return Parser(text).query()
