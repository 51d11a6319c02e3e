"""Console lines into the Log Analytics workspace an environment's logs go to (ingestion delayed).

Kept apart from models.py so the runtime can send lines without importing the ARM side. A row
becomes queryable `log_ingestion` emulated seconds after its line was captured (timing.py;
UNCONFIRMED figure: Microsoft documents a typical ingestion latency of 20 s to 3 min).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aca_gpu.emulator.state import Environment, Event, LogLine, Replica, State
from aca_gpu.emulator.timing import DURATIONS, Clock


@dataclass
class ConsoleRow:
    """One row as its table keeps it (the `_s`/`_d` columns of the log-analytics destination)."""

    visible_at: float  # monotonic wall time from which a query sees it (ingestion delay)
    columns: dict[str, Any]


def destination_of(env: Environment) -> str | None:
    """The customerId of the workspace an environment sends its console logs to, if any."""
    config = env.extra.get("appLogsConfiguration")
    if not isinstance(config, dict) or str(config.get("destination") or "").lower() != "log-analytics":
        return None
    analytics = config.get("logAnalyticsConfiguration") or {}
    customer = analytics.get("customerId") if isinstance(analytics, dict) else None
    return str(customer) if customer else None


def _workspace(state: State, env_rg: str, env_name: str) -> Any:
    """The workspace (models.Workspace) an environment's logs go to, in the same subscription."""
    env = state.envs.get((env_rg.lower(), env_name.lower()))
    customer = destination_of(env) if env is not None else None
    if not customer:
        return None
    ws = next((w for w in state.log_workspaces.values() if w.customer_id.lower() == customer.lower()), None)
    return ws if ws is not None and ws.rg.lower() in state.rgs else None


def ingest_event(state: State, clock: Clock, event: Event) -> None:
    """A system event into `ContainerAppSystemLogs_CL` (its `_s` column names are UNCONFIRMED)."""
    ws = _workspace(state, event.env_rg, event.env)
    if ws is None:
        return
    ws.system_rows.append(
        ConsoleRow(
            clock.now() + clock.scaled(DURATIONS["log_ingestion"]),
            {
                "TimeGenerated": event.at,
                "_timestamp_d": event.at.timestamp(),
                "EnvironmentName_s": event.env,
                "ContainerAppName_s": event.app or "",
                "RevisionName_s": event.revision,
                "ReplicaName_s": event.replica,
                "Reason_s": event.reason,
                "Type_s": event.type,
                "Log_s": event.msg,
            },
        )
    )


def ingest(state: State, clock: Clock, rep: Replica, container: str, lines: list[LogLine]) -> None:
    """A replica's new console lines, sent where its environment's logs go (if anywhere): a
    workspace of the same subscription."""
    ws = _workspace(state, rep.env_rg, rep.env)
    if ws is None:
        return
    visible = clock.now() + clock.scaled(DURATIONS["log_ingestion"])
    for line in lines:
        ws.rows.append(
            ConsoleRow(
                visible,
                {
                    "TimeGenerated": line.at,
                    "_timestamp_d": line.at.timestamp(),
                    "EnvironmentName_s": rep.env,
                    "ContainerAppName_s": rep.owner,
                    "ContainerJobName_s": rep.owner if rep.kind == "job" else "",
                    "RevisionName_s": rep.parent,
                    "ContainerGroupName_s": rep.name,
                    "ContainerName_s": container,
                    "Stream_s": line.stream,
                    "Log_s": line.text,
                },
            )
        )
