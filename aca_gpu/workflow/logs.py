"""`acagpu logs`: console logs of the explorer or the tester's latest execution, or the system events.

Lines are yielded as they arrive so `--follow` prints live; the CLI decides how to render them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

from aca_gpu.errors import NotFound
from aca_gpu.models import Cloud
from aca_gpu.workflow.context import Run

Source = Literal["explorer", "tester"]
FOLLOW_TIMEOUT_S = 3600.0


def latest_execution(cloud: Cloud, run: Run) -> str:
    executions = cloud.list_executions(run.resource_group, run.names.tester)
    if not executions:
        raise NotFound(
            f"the tester of run {run.run_id} has no executions", hint="start one with `acagpu test`"
        )
    latest = max(executions, key=lambda e: (e.start_time or "", e.name))
    return latest.name


def log_lines(
    cloud: Cloud,
    run: Run,
    *,
    source: Source = "explorer",
    follow: bool = False,
    tail: int = 20,
    system: bool = False,
) -> Iterator[str]:
    """The lines to show; system events are rendered one JSON object per line."""
    if system:
        where = (
            {"app": run.names.explorer} if source == "explorer" else {"environment": run.names.environment}
        )
        for event in cloud.system_events(run.resource_group, tail=tail, **where):
            yield json.dumps(event, sort_keys=True, default=str)
        return
    if source == "tester":
        execution = latest_execution(cloud, run)
        yield from cloud.job_logs(
            run.resource_group,
            run.names.tester,
            execution,
            follow=follow,
            tail=tail,
            timeout=FOLLOW_TIMEOUT_S,
        )
        return
    app = cloud.get_app(run.resource_group, run.names.explorer)
    if app is None:
        raise NotFound(f"run {run.run_id} has no explorer app {run.names.explorer}")
    if not app.max_replicas:
        raise NotFound(
            f"the explorer of run {run.run_id} is scaled to zero (kept run): it has no replica to read",
            hint="`acagpu logs --tester` or `--system`; `acagpu smi` wakes the explorer for one command",
        )
    yield from cloud.app_logs(
        run.resource_group, run.names.explorer, follow=follow, tail=tail, timeout=FOLLOW_TIMEOUT_S
    )
