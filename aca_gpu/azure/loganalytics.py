"""Log Analytics: the workspace an environment sends its console lines to, and reading them back.

ACA removes a finished job replica, and with it the log stream, within seconds (how many is not
established); a line printed by a container that exited at once may never be streamed. An
environment whose `appLogsConfiguration` is `log-analytics` also ships every console line to its
workspace's `ContainerAppConsoleLogs_CL` table, where it stays (30 days by default). Lines arrive
there after an ingestion delay (Microsoft documents 20 s to 3 min as typical).

The workspace is made with azure-mgmt-loganalytics (its shared key goes into the environment's PUT
and nowhere else); lines are read with azure-monitor-query's LogsQueryClient, KQL filtered by the
job and the execution's replica names (`{execution}-{suffix}`). With the ARM endpoint overridden
(the emulator), the query API is served on the same host.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from aca_gpu.azure.apps import read_created, result_or_read
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.translate import retrying, translate_errors
from aca_gpu.errors import CloudError
from aca_gpu.models import LogsDestination

WHAT = "Log Analytics workspace"
TABLE = "ContainerAppConsoleLogs_CL"
SYSTEM_TABLE = "ContainerAppSystemLogs_CL"
# the platform's own record that an execution ended (its system log; column names UNCONFIRMED)
ENDED_REASONS = frozenset({"Completed", "BackoffLimitExceeded", "DeadlineExceeded", "Failed"})
SKU = "PerGB2018"  # pay per GB ingested (the first 5 GB a month of a billing account are free)
RETENTION_DAYS = 30  # the free retention
LOOKBACK = timedelta(days=1)  # an execution's lines are at most this old when read back
PUBLIC_ENDPOINT = "https://api.loganalytics.io"


def ensure_workspace(
    clients: Clients, resource_group: str, name: str, location: str, tags: Mapping[str, str]
) -> LogsDestination:
    """Make (or find again) the workspace; its customerId and primary shared key.

    Each call is retried as every create step's is: the PUT is idempotent (sent again after a lost
    or unreadable answer), a 404 right after the create is ARM's eventual consistency (read again,
    then `NotFoundAfterCreate`, exit 7, never "not found" as bad input), and the shared-keys POST
    only reads (a safe POST: sent again after a reset, a 502 or a cut answer)."""
    body = {
        "location": location,
        "tags": dict(tags),
        "properties": {"sku": {"name": SKU}, "retentionInDays": RETENTION_DAYS},
    }
    ops = clients.loganalytics.workspaces

    def get() -> Any:
        return ops.get(resource_group, name)

    def put() -> Any:
        return result_or_read(ops.begin_create_or_update(resource_group, name, body), WHAT, name, get)

    retrying(f"create {WHAT}", name, put)
    # read back rather than taken from the create's answer: a recording keeps no LRO's first body,
    # so a replay of this run reads the workspace, as here
    made = retrying(f"read {WHAT}", name, lambda: read_created(WHAT, name, get))
    keys = retrying(
        f"read the shared keys of {WHAT}",
        name,
        lambda: read_created(
            WHAT, name, lambda: clients.loganalytics.shared_keys.get_shared_keys(resource_group, name)
        ),
    )
    customer = getattr(made, "customer_id", None)
    key = getattr(keys, "primary_shared_key", None)
    if not customer or not key:
        raise CloudError(f"Log Analytics workspace {name} answered no id or key", code="WorkspaceIncomplete")
    return LogsDestination(str(customer), str(key))


def query_text(job: str, execution: str) -> str:
    """One execution's console lines, oldest first (its replicas are named `{execution}-...`)."""
    for value in (job, execution):
        if "'" in value or "\\" in value:  # ARM names never hold these; never build a query from them
            raise CloudError(f"unexpected character in {value!r}", code="BadName")
    return (
        f"{TABLE} | where ContainerJobName_s == '{job}' and ContainerGroupName_s startswith '{execution}-'"
        " | project TimeGenerated, Stream_s, Log_s | order by TimeGenerated asc"
    )


def _rows(clients: Clients, workspace_id: str, query: str, what: str) -> list[dict[str, Any]]:
    """The rows of one query over the last day, as {column: value}."""
    from azure.monitor.query import LogsQueryStatus

    now = datetime.now(UTC)
    with translate_errors(f"read {what} from Log Analytics for", workspace_id):
        result = clients.logs_query.query_workspace(
            workspace_id, query, timespan=(now - LOOKBACK, now + timedelta(minutes=5))
        )
    if result.status != LogsQueryStatus.SUCCESS:  # a partial answer: what it holds is still rows
        tables = getattr(result, "partial_data", None) or []
    else:
        tables = result.tables
    return [dict(zip(list(table.columns), list(row), strict=False)) for table in tables for row in table.rows]


def ended_text(job: str, execution: str) -> str:
    """The execution's own end in the system log (`RevisionName_s` names a job's execution)."""
    query_text(job, execution)  # the same name checks
    return (
        f"{SYSTEM_TABLE} | where ContainerAppName_s == '{job}' and RevisionName_s == '{execution}'"
        " | project TimeGenerated, Reason_s"
    )


def execution_end_logged(clients: Clients, workspace_id: str, job: str, execution: str) -> bool:
    """Has the workspace ingested the platform's record of the execution's end? Its console lines
    were printed before it, so once it is there they are too (a watermark; UNCONFIRMED that both
    tables are ingested in order)."""
    rows = _rows(clients, workspace_id, ended_text(job, execution), "the execution's end")
    return any(str(r.get("Reason_s") or "") in ENDED_REASONS for r in rows)


def console_lines(
    clients: Clients, workspace_id: str, job: str, execution: str
) -> list[tuple[str | None, str, str]]:
    """(timestamp, stream, line) of the execution's lines the workspace has ingested so far."""
    lines: list[tuple[str | None, str, str]] = []
    for cells in _rows(clients, workspace_id, query_text(job, execution), "the console lines"):
        stamp = cells.get("TimeGenerated")
        when = stamp.isoformat() if isinstance(stamp, datetime) else (str(stamp) if stamp else None)
        stream = "stderr" if str(cells.get("Stream_s") or "").lower() == "stderr" else "stdout"
        lines.append((when, stream, str(cells.get("Log_s") or "")))
    return lines
