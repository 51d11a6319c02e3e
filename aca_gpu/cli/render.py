"""Tables for people, sized to the terminal (COLUMNS wins), drawn by rich so nothing runs off the edge."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, TextIO

from aca_gpu.output import terminal_width


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    stream: TextIO | None = None,
    wrap: str | None = None,
    right: Sequence[str] = (),
    width: int | None = None,
) -> str:
    """A plain-text table no wider than the terminal; the `wrap` column folds, the others shrink."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    width = width or terminal_width(stream)
    widths = _fit_widths(headers, rows, width, wrap, right)
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False, header_style="bold")
    for header, col_width in zip(headers, widths, strict=True):
        grid.add_column(
            header,
            justify="right" if header in right else "left",
            overflow="fold" if header == wrap else "ellipsis",
            no_wrap=header != wrap,
            width=col_width,
        )
    for row in rows:
        grid.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, highlight=False, emoji=False, soft_wrap=False).print(
        grid
    )
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


GAP = 3  # what SIMPLE_HEAD puts between columns


def _fit_widths(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    wrap: str | None,
    right: Sequence[str] = (),
) -> list[int]:
    """Natural widths, then the widest columns give way until the table fits; `wrap` takes the rest.

    The first column (what the row is) keeps up to a third of the width."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    floor = [min(n, max(len(h), 6)) for n, h in zip(natural, headers, strict=True)]
    floor[0] = min(natural[0], max(floor[0], width // 3))  # the first column names the row: keep it
    for i, header in enumerate(headers):
        if header in right:  # numbers are never cut
            floor[i] = natural[i]
    wrap_at = headers.index(wrap) if wrap in headers else None
    budget = width - GAP * (len(headers) - 1)
    if wrap_at is not None:
        budget -= max(floor[wrap_at], min(natural[wrap_at], 20))
    widths = list(natural)
    others = [i for i in range(len(headers)) if i != wrap_at]
    for floors in (floor, [n if h in right else min(n, 4) for n, h in zip(natural, headers, strict=True)]):
        while sum(widths[i] for i in others) > budget:  # a very narrow terminal: headers may be cut too
            widest = max(others, key=lambda i: widths[i] - floors[i])
            if widths[widest] <= floors[widest]:
                break
            widths[widest] -= 1
    if wrap_at is not None:
        rest = width - GAP * (len(headers) - 1) - sum(widths[i] for i in others)
        widths[wrap_at] = max(floor[wrap_at], min(natural[wrap_at], rest))
    return widths


def per_subscription(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Rows (each with a `subscription`) grouped by it, in first-seen order. A sweep of several
    subscriptions prints a section a subscription, headed by its whole id: as a table column a
    36-character id is cut, and ids of one tenant often share their first characters."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        sections.setdefault(str(row.get("subscription") or "?"), []).append(row)
    return list(sections.items())
