"""`acagpu logs`: console logs of the explorer or the tester's latest execution, or the system events.

Lines are yielded as they arrive so `--follow` prints live; the CLI decides how to render them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from aca_gpu.errors import NotFound
from aca_gpu.models import Cloud, ExecutionInfo
from aca_gpu.workflow.base.context import Run

Source = Literal["explorer", "tester"]
FOLLOW_TIMEOUT_S = 3600.0


def latest_execution(cloud: Cloud, run: Run) -> ExecutionInfo:
    executions = cloud.list_executions(run.resource_group, run.names.tester)
    if not executions:
        raise NotFound(
            f"the tester of run {run.run_id} has no executions", hint="start one with `acagpu test`"
        )
    return max(executions, key=lambda e: (e.start_time or "", e.name))


class ExecutionEnded(NotFound):
    """The execution finished and ACA removed its replica, and with it the console log stream."""


def ended_error(run: Run, execution: ExecutionInfo) -> ExecutionEnded:
    when = f" at {execution.end_time}" if execution.end_time else ""
    return ExecutionEnded(
        f"the tester execution {execution.name} of run {run.run_id} ended ({execution.status}){when}; "
        "ACA removes a finished job's replica and its console log stream with it",
        code="ExecutionEnded",
        hint="its result is in the `acagpu up`/`acagpu test` output; `acagpu logs --tester --system` "
        "shows its events; `acagpu test` runs it again",
    )


def log_lines(
    cloud: Cloud,
    run: Run,
    *,
    source: Source = "explorer",
    follow: bool = False,
    tail: int = 20,
) -> Iterator[str]:
    """The console lines to show, as they arrive (system events: `system_events`)."""
    if source == "tester":
        execution = latest_execution(cloud, run)
        if execution.finished:
            raise ended_error(run, execution)
        said = False
        for line in cloud.job_logs(
            run.resource_group,
            run.names.tester,
            execution.name,
            follow=follow,
            tail=tail,
            timeout=FOLLOW_TIMEOUT_S,
        ):
            said = True
            yield line
        if not said:
            # the replica (and its console stream) may go between the look above and the read: a
            # read that found nothing for an execution now finished is that, not an empty log
            now = cloud.get_execution(run.resource_group, run.names.tester, execution.name)
            if now.finished:
                raise ended_error(run, now)
        return
    app = cloud.get_app(run.resource_group, run.names.explorer)
    if app is None:
        raise no_explorer(cloud, run)
    from aca_gpu.workflow.engine.probe import STOPPED  # a job's logs need no nvidia-smi parser

    if (app.running_status or "").lower() == STOPPED.lower() or not app.max_replicas:
        # a kept run's explorer is stopped between uses: no replica, so no console stream to wait on
        raise NotFound(
            f"the explorer of run {run.run_id} is stopped (kept run): it has no replica, so no console log",
            code="ExplorerStopped",
            hint=f"`acagpu logs --run-id {run.run_id} --system` shows its events; `acagpu smi` or "
            "`acagpu exec -- CMD` start it for one command",
        )
    yield from cloud.app_logs(
        run.resource_group, run.names.explorer, follow=follow, tail=tail, timeout=FOLLOW_TIMEOUT_S
    )


def no_explorer(cloud: Cloud, run: Run) -> NotFound:
    """A run without an explorer: an `acagpu run` (its job `run-<id>`) has only its container's lines,
    which stream to the shell that started it; say so, not just what is missing."""
    job = f"run-{run.run_id}"
    if any(j.name == job for j in cloud.list_jobs(run.resource_group)):
        return NotFound(
            f"run {run.run_id} is an `acagpu run` (job {job}): its container's lines stream to the shell "
            "that started it (with -o json, into its document); `acagpu logs` reads an `up` run's "
            "explorer or tester",
            code="NoExplorer",
            hint="`acagpu status` shows its phase (and a fan-out's shards) from any shell",
        )
    return NotFound(f"run {run.run_id} has no explorer app {run.names.explorer}")


# the fields of a system event worth a column, in order (ACA's event stream: TimeStamp, Type, ...)
EVENT_COLUMNS = ("TimeStamp", "Type", "Reason", "ReplicaName", "Msg")


def system_events(
    cloud: Cloud, run: Run, *, source: Source = "explorer", tail: int = 20
) -> list[dict[str, Any]]:
    """Scheduling, image pull and restart events of the explorer app (or, for the tester, the
    environment), oldest first, every TimeStamp in one form (`event_time`)."""
    if source == "explorer" and cloud.get_app(run.resource_group, run.names.explorer) is None:
        raise no_explorer(cloud, run)
    where = {"app": run.names.explorer} if source == "explorer" else {"environment": run.names.environment}
    return in_time_order(cloud.system_events(run.resource_group, tail=tail, **where))


def event_time(text: str) -> datetime | None:
    """An event's TimeStamp as UTC: ACA writes the platform's events as `2026-11-27 06:59:03 +0000
    UTC` and the stream's own connect messages as ISO 8601 (`2026-11-27T06:59:05Z`)."""
    text = text.strip()
    for form in ("%Y-%m-%d %H:%M:%S %z UTC", "%Y-%m-%d %H:%M:%S.%f %z UTC"):
        try:
            return datetime.strptime(text, form).astimezone(UTC)
        except ValueError:
            pass
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp.astimezone(UTC) if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def in_time_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sorted by time (a stable sort: events of one second keep the stream's order), each TimeStamp
    as `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`; one whose time cannot be read keeps its text and goes last."""
    timed: list[tuple[datetime, int, dict[str, Any]]] = []
    untimed: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        key = next((k for k in event if k.lower() == "timestamp"), None)
        when = event_time(str(event[key])) if key else None
        if key is None or when is None:
            untimed.append(event)
            continue
        text = when.isoformat().replace("+00:00", "Z")
        timed.append((when, index, {**event, key: text}))
    return [event for _, _, event in sorted(timed, key=lambda t: (t[0], t[1]))] + untimed
