"""The gpu-tester job: make it (or reuse it), start an execution, follow it from the moment it exists.

The verdict comes from what the tester said (its `ACAGPU_RESULT` line) and how it ended (the
container's exit code from the execution's detailed status). A result line that cannot be read
from a tester that exited 0 is "result unavailable" (exit 7), never "GPU failed": ACA removes a
finished job replica and its logs soon after exit, and log streams drop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aca_gpu.errors import AcaGpuError, InfraError, WaitTimedOut
from aca_gpu.gpu import tester_result
from aca_gpu.models import Cloud, ExecutionInfo, JobSpec
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Waiter
from aca_gpu.workflow.outcome import TesterOutcome
from aca_gpu.workflow.replicas import event_reasons_of

LOG_RECONNECTS = 20
FINAL_STATUS_WAIT_S = 20.0  # how long an ended stream may wait for the execution's final status


@dataclass
class TesterRun:
    """One execution being followed; times are monotonic seconds, for the measured GPU lifetime."""

    execution: str
    reused: bool = False
    started: float = field(default_factory=time.monotonic)
    running: float | None = None  # when its container was first seen running
    first_line: float | None = None  # when its first log line arrived
    ended: float | None = None
    stopped: float | None = None  # when teardown deleted the job: its replica bills until then
    lines: list[str] = field(default_factory=list)
    info: ExecutionInfo | None = None

    @property
    def seconds(self) -> float:
        """Measured replica lifetime: from its container seen running (else its first line, else
        the start request) to the stop by teardown when there was one (the replica lingers, billed,
        after its result), else to the result."""
        end = self.stopped or self.ended or time.monotonic()
        return max(0.0, end - (self.running or self.first_line or self.started))

    def has_result(self) -> bool:
        return any(checks.RESULT_MARKER in line for line in self.lines)


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


def _execution(cloud: Cloud, resource_group: str, job: str, execution: str) -> ExecutionInfo | None:
    try:
        return cloud.get_execution(resource_group, job, execution)
    except AcaGpuError:
        return None


def _seen_running(run: TesterRun) -> None:
    run.running = run.running or time.monotonic()


def _read(
    cloud: Cloud, resource_group: str, job: str, run: TesterRun, *, follow: bool, timeout: float
) -> None:
    """One connection to the execution's log; a reconnect replays the tail, so known lines are skipped."""
    seen = set(run.lines)
    stream = cloud.job_logs(
        resource_group,
        job,
        run.execution,
        follow=follow,
        tail=300,
        stop_when=lambda line: checks.RESULT_MARKER in line,
        timeout=timeout,
        on_running=lambda: _seen_running(run),
    )
    for line in stream:
        if run.first_line is None:
            run.first_line = time.monotonic()
        if line not in seen:
            seen.add(line)
            run.lines.append(line)


def follow_result(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: TesterRun,
    waiter: Waiter,
    *,
    timeout: float,
    environment: str | None = None,
) -> TesterOutcome:
    """Follow the execution until its result line or its end, then judge it (see the module doc)."""
    deadline = time.monotonic() + timeout
    failures = 0
    last_error = ""
    while not run.has_result():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            why = event_reasons_of(cloud, resource_group, environment) if environment else []
            raise WaitTimedOut(
                "; ".join(
                    [
                        f"timed out after {timeout:.0f}s waiting for the tester's result line",
                        *why,
                    ]
                )
            )
        if waiter.cancel.is_set():
            raise WaitTimedOut("stopped following the tester: cancelled", code="Cancelled")
        try:
            _read(cloud, resource_group, job, run, follow=True, timeout=remaining)
        except WaitTimedOut as exc:
            why = event_reasons_of(cloud, resource_group, environment) if environment else []
            raise WaitTimedOut("; ".join([exc.message, *why]), code=exc.code) from exc
        except AcaGpuError as exc:  # a dropped or refused stream: reconnect, bounded
            failures += 1
            last_error = exc.message
            if failures > LOG_RECONNECTS:
                break
        if run.has_result():
            break
        run.info = _execution(cloud, resource_group, job, run.execution)
        if run.info is not None and run.info.finished:
            try:  # one last plain read, in case the stream dropped just before the end
                _read(cloud, resource_group, job, run, follow=False, timeout=30.0)
            except AcaGpuError as exc:
                last_error = exc.message
            break
        waiter.cancel.wait(waiter.interval)
    run.ended = time.monotonic()
    if not run.has_result():
        run.info = _final_status(cloud, resource_group, job, run, waiter)
    return judge(run, lost=last_error)


def _final_status(
    cloud: Cloud, resource_group: str, job: str, run: TesterRun, waiter: Waiter
) -> ExecutionInfo | None:
    """The execution's status once it has ended (a stream can end a moment before the status does)."""
    deadline = time.monotonic() + FINAL_STATUS_WAIT_S
    info = run.info
    while True:
        info = _execution(cloud, resource_group, job, run.execution) or info
        if info is not None and info.finished:
            return info
        if time.monotonic() >= deadline or waiter.cancel.is_set():
            return info
        waiter.cancel.wait(min(waiter.interval, 1.0))


def judge(run: TesterRun, *, lost: str = "") -> TesterOutcome:
    """pass/fail from the result line and the exit code; `unavailable` when only transport failed."""
    info = run.info
    codes = info.exit_codes if info else ()
    code = next((c for c in codes if c != 0), codes[0] if codes else None)

    def out(
        status: str, reason: str | None, result: tester_result.TesterResult | None = None
    ) -> TesterOutcome:
        started = None if run.first_line is None else round(run.first_line - run.started, 3)
        return TesterOutcome(status, run.execution, result, code, reason, run.seconds, started)

    if run.has_result():
        try:
            result = tester_result.parse_tester_output("\n".join(run.lines))
        except tester_result.NoTesterResult as exc:
            return out("unavailable", exc.message)
        if result.passed and code not in (None, 0):
            return out("fail", f"the tester exited with code {code}", result)
        return out(result.status, result.reason, result)
    tail = " | ".join(line.strip() for line in run.lines[-3:] if line.strip())
    if code not in (None, 0):
        return out("fail", f"the tester exited with code {code}" + (f": {tail}" if tail else ""))
    status = info.status if info else None
    said = " ".join(filter(None, (info.reason, info.message))) if info else ""
    if "deadline" in said.lower():  # the platform ended it at --max-minutes: a wait, not a verdict
        return out("timeout", f"the tester did not finish within its deadline ({said})")
    if code is None and status == "Failed":
        message = (info.message or info.reason) if info else None
        return out("fail", "the tester's execution failed" + (f": {message}" if message else ""))
    what = "exited 0" if code == 0 else f"ended {status or 'in an unknown state'}"
    why = f" ({lost})" if lost else ""
    return out("unavailable", f"the tester {what} but its {checks.RESULT_MARKER} line could not be read{why}")


def unavailable_error(outcome: TesterOutcome) -> AcaGpuError:
    """What a tester outcome without a verdict means for the run: a lost result or a deadline."""
    if outcome.status == "timeout":
        return WaitTimedOut(f"tester: {outcome.reason}", code="TesterDeadline")
    return InfraError(f"tester result unavailable: {outcome.reason}", code="ResultUnavailable")
