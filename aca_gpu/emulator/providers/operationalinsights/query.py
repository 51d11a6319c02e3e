"""The Log Analytics query API subset: `POST /v1/workspaces/{customerId}/query` with a KQL line.

What `azure-monitor-query`'s LogsQueryClient sends: `{"query": "...", "timespan": "start/end"}` with
an ARM-issued bearer token. The KQL subset is what a client reading one execution's console lines
needs: a table, then `| where` (`==`, `!=`, `startswith`, `has`, joined by `and`), `| project`,
`| order by` / `| sort by` (`asc`/`desc`) and `| take` / `| limit`. Anything else is answered as
the service answers a query it cannot run (400 BadArgumentError with an inner SyntaxError), so a
client never gets rows the real service would not give. Answer: `{"tables": [{"name":
"PrimaryResult", "columns": [{"name", "type"}], "rows": [[...]]}]}`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import json_response, read_json
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.operationalinsights import models

CONDITION = re.compile(r"^\s*(\w+)\s*(==|!=|startswith|has)\s*(['\"])(.*)\3\s*$", re.IGNORECASE)
ORDER = re.compile(r"^(?:order|sort)\s+by\s+(\w+)(?:\s+(asc|desc))?$", re.IGNORECASE)
TAKE = re.compile(r"^(?:take|limit)\s+(\d+)$", re.IGNORECASE)
TYPES = {"TimeGenerated": "datetime", "_timestamp_d": "real"}


class QueryRefused(Exception):
    """A query this subset (or the service) cannot run."""

    def __init__(self, message: str, inner: str = "SyntaxError") -> None:
        super().__init__(message)
        self.inner = inner


def _error(message: str, inner: str, status: int = 400) -> web.Response:
    return json_response(
        {
            "error": {
                "message": "The request had some invalid properties",
                "code": "BadArgumentError",
                "innererror": {"code": inner, "message": message},
            }
        },
        status=status,
    )


def _split(query: str) -> list[str]:
    """The `|`-separated operators (a `|` inside a quoted value stays in it)."""
    parts, current, quote = [], "", ""
    for ch in query:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "|":
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    parts.append(current.strip())
    return [p for p in parts if p]


def _matches(row: dict[str, Any], column: str, op: str, value: str) -> bool:
    if column not in row:
        raise QueryRefused(f"Failed to resolve scalar expression named '{column}'", "SemanticError")
    have = str(row[column])
    op = op.lower()
    if op == "==":
        return have == value
    if op == "!=":
        return have != value
    if op == "startswith":
        return have.lower().startswith(value.lower())
    return value.lower() in have.lower()  # has (a term search; a substring is close enough here)


def _where(rows: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    conditions = []
    for part in re.split(r"\s+and\s+", text, flags=re.IGNORECASE):
        found = CONDITION.match(part)
        if found is None:
            raise QueryRefused(f"unsupported condition: {part.strip()!r}")
        conditions.append((found.group(1), found.group(2), found.group(4)))
    return [r for r in rows if all(_matches(r, c, op, v) for c, op, v in conditions)]


def _in_span(rows: list[dict[str, Any]], timespan: Any) -> list[dict[str, Any]]:
    """`start/end` (ISO 8601) keeps the rows generated in it; a duration alone is not narrowed here."""
    if not isinstance(timespan, str) or "/" not in timespan:
        return rows
    try:
        start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in timespan.split("/", 1))
    except ValueError:
        return rows
    return [r for r in rows if start <= r["TimeGenerated"] <= end]


def table_of(query: str) -> str:
    """The table a query reads (its first operator), refused when the workspace has no such table."""
    ops = _split(query)
    if not ops:
        raise QueryRefused("empty query")
    if ops[0] not in (models.TABLE, models.SYSTEM_TABLE):
        raise QueryRefused(f"Failed to resolve table or column expression named '{ops[0]}'", "SemanticError")
    return ops[0]


def run(rows: list[dict[str, Any]], query: str) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of `query` over its table's visible rows."""
    ops = _split(query)
    table = table_of(query)
    columns = list(rows[0]) if rows else list(_empty_columns(table))
    for op in ops[1:]:
        word = op.split(None, 1)[0].lower()
        rest = op[len(word) :].strip()
        if word == "where":
            rows = _where(rows, rest)
        elif word == "project":
            wanted = [c.strip() for c in rest.split(",") if c.strip()]
            unknown = [c for c in wanted if c not in columns]
            if unknown:
                named = f"Failed to resolve scalar expression named '{unknown[0]}'"
                raise QueryRefused(named, "SemanticError")
            columns = wanted
        elif ORDER.match(op):
            found = ORDER.match(op)
            assert found is not None
            column, direction = found.group(1), (found.group(2) or "desc").lower()  # KQL's default: desc
            if column not in columns and rows and column not in rows[0]:
                raise QueryRefused(f"Failed to resolve scalar expression named '{column}'", "SemanticError")
            rows = sorted(rows, key=lambda r: r.get(column) or 0, reverse=direction == "desc")
        elif TAKE.match(op):
            found = TAKE.match(op)
            assert found is not None
            rows = rows[: int(found.group(1))]
        else:
            raise QueryRefused(f"unsupported operator: {op!r}")
    return columns, rows


def _empty_columns(table: str) -> list[str]:
    if table == models.SYSTEM_TABLE:
        return ["TimeGenerated", "_timestamp_d", "EnvironmentName_s", "ContainerAppName_s", "RevisionName_s",
                "ReplicaName_s", "Reason_s", "Type_s", "Log_s"]  # fmt: skip
    return ["TimeGenerated", "_timestamp_d", "EnvironmentName_s", "ContainerAppName_s", "ContainerJobName_s",
            "RevisionName_s", "ContainerGroupName_s", "ContainerName_s", "Stream_s", "Log_s"]  # fmt: skip


def _cell(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


async def query(ctx: Ctx, req: web.Request, workspace_id: str) -> web.StreamResponse:
    ws = models.by_customer_id(ctx, workspace_id)
    if ws is None:
        return _error(f"Workspace '{workspace_id}' could not be found", "WorkspaceNotFoundError", 404)
    doc = read_json(await req.read())
    text = doc.get("query")
    if not isinstance(text, str):
        return _error("The query property is required", "SyntaxError")
    owner = ctx
    for sub in (ctx.fleet or {ctx.subscription: ctx}).values():
        if ws in models.workspaces(sub).values():
            owner = sub
    try:
        visible = models.visible_rows(owner, ws, table_of(text))
        columns, rows = run(_in_span(visible, doc.get("timespan")), text)
    except QueryRefused as exc:
        return _error(str(exc), exc.inner)
    return json_response(
        {
            "tables": [
                {
                    "name": "PrimaryResult",
                    "columns": [{"name": c, "type": TYPES.get(c, "string")} for c in columns],
                    "rows": [[_cell(r.get(c)) for c in columns] for r in rows],
                }
            ]
        }
    )
