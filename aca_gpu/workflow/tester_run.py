"""The gpu-tester job: make it (or reuse it), start an execution, follow its logs to the result line.

Log streams drop; the follow reconnects until the `ACAGPU_RESULT` line arrives, the execution
ends, or the deadline passes. Shared by `up` and `acagpu test`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError, CloudError, WaitTimedOut
from aca_gpu.models import Cloud, ExecutionInfo, JobSpec
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Waiter
from aca_gpu.workflow.replicas import event_reasons_of

LOG_RECONNECTS = 20


@dataclass
class TesterRun:
    """One execution being followed; times are monotonic seconds, for the measured GPU lifetime."""

    execution: str
    reused: bool = False
    started: float = field(default_factory=time.monotonic)
    first_line: float | None = None  # when the replica was running (its first log line arrived)
    ended: float | None = None
    lines: list[str] = field(default_factory=list)
    info: ExecutionInfo | None = None

    @property
    def seconds(self) -> float:
        """Measured replica lifetime: from its first line (else from the start request) to the result."""
        return max(0.0, (self.ended or time.monotonic()) - (self.first_line or self.started))


def ensure_job(cloud: Cloud, spec: JobSpec) -> bool:
    """Create the tester job unless it exists (resume). Returns True when it was reused."""
    if cloud.get_job(spec.resource_group, spec.name) is not None:
        return True
    cloud.create_job(spec)
    return False


def start_execution(cloud: Cloud, resource_group: str, job: str, *, resume: bool) -> TesterRun:
    """A new execution, or on resume the one still running (a re-run should not pay twice)."""
    if resume:
        for info in cloud.list_executions(resource_group, job):
            if not info.finished and info.status not in (None, "Unknown"):
                return TesterRun(execution=info.name, reused=True)
    return TesterRun(execution=cloud.start_job(resource_group, job))


def follow_result(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: TesterRun,
    waiter: Waiter,
    *,
    timeout: float,
    environment: str | None = None,
) -> dict[str, Any]:
    """Follow the execution's logs until the result line; parse it (a missing line is a failed test).

    Called right after the start: a short tester can finish, and its replica vanish, before a
    later follow would connect. A replica that never runs is WaitTimedOut with the system events.
    """
    deadline = time.monotonic() + timeout
    seen: set[str] = set()

    def has_result() -> bool:
        return any(checks.RESULT_MARKER in line for line in run.lines)

    attempts = 0
    while not has_result():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimedOut(
                f"timed out after {timeout:.0f}s waiting for the tester's {checks.RESULT_MARKER} line"
            )
        if waiter.cancel.is_set():
            raise WaitTimedOut("stopped following the tester: cancelled")
        try:
            stream = cloud.job_logs(
                resource_group,
                job,
                run.execution,
                follow=True,
                tail=300,
                stop_when=lambda line: checks.RESULT_MARKER in line,
                timeout=remaining,
            )
            for line in stream:
                if run.first_line is None:
                    run.first_line = time.monotonic()
                if line not in seen:  # a reconnect replays the tail
                    seen.add(line)
                    run.lines.append(line)
        except WaitTimedOut as exc:
            why = event_reasons_of(cloud, resource_group, environment) if environment else []
            raise WaitTimedOut("; ".join([exc.message, *why]), code=exc.code) from exc
        except CloudError:
            attempts += 1
            if attempts > LOG_RECONNECTS:
                raise
        if has_result():
            break
        run.info = _execution(cloud, resource_group, job, run.execution)
        if run.info is not None and run.info.finished:
            _drain(cloud, resource_group, job, run, seen)
            break
        waiter.cancel.wait(waiter.interval)
    run.ended = time.monotonic()
    run.info = _execution(cloud, resource_group, job, run.execution) or run.info
    result = checks.parse_tester("\n".join(run.lines))
    if run.info is not None:
        result.setdefault("execution_status", run.info.status)
    return result


def _execution(cloud: Cloud, resource_group: str, job: str, execution: str) -> ExecutionInfo | None:
    try:
        return cloud.get_execution(resource_group, job, execution)
    except AcaGpuError:
        return None


def _drain(cloud: Cloud, resource_group: str, job: str, run: TesterRun, seen: set[str]) -> None:
    """After the execution ended: one last non-follow read, in case the stream dropped before the end."""
    try:
        for line in cloud.job_logs(resource_group, job, run.execution, follow=False, tail=300):
            if line not in seen:
                seen.add(line)
                run.lines.append(line)
    except AcaGpuError:
        return
