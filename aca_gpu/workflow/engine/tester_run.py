"""The gpu-tester job: make it (or reuse it), start an execution, follow it from the moment it exists.

The verdict comes from what the tester said (its `ACAGPU_RESULT` line) and how it ended (the
container's exit code from the execution's detailed status). A result line that cannot be read
from a tester that exited 0 is "result unavailable" (exit 7), never "GPU failed": ACA removes a
finished job replica and its logs soon after exit, and log streams drop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from aca_gpu import tester
from aca_gpu.errors import AcaGpuError, InfraError, NotFound, WaitTimedOut
from aca_gpu.gpu import tester_result
from aca_gpu.models import Cloud, ContainerDef, JobSpec
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import executions
from aca_gpu.workflow.engine.outcome import TesterOutcome
from aca_gpu.workflow.engine.task_records import PLATFORM, USER, RetryPolicy, Verdict

# The tester is a task (engine/task_runner.py) whose lost result is the platform's fault, but a second
# tester would bill its whole benchmark again: it is reported (exit 7), not started again
TESTER_RETRY = RetryPolicy(retries=0, platform_retries=0)
# after its result line (and its stop, when it stays a result grace), how long the tester's end is
# waited for, for its exit code: short, since its verdict is already read
SETTLE_S = 2.0


class TesterRun(executions.ExecutionRun):
    """The tester's execution: its verdict is the result line it prints."""

    __test__ = False  # a name pytest would otherwise try to collect

    def has_result(self) -> bool:
        return any(checks.RESULT_MARKER in line for line in self.lines)


def ensure_job(cloud: Cloud, spec: JobSpec) -> bool:
    """Create the tester job unless it exists (resume). Returns True when it was reused."""
    if cloud.get_job(spec.resource_group, spec.name) is not None:
        return True
    cloud.create_job(spec)
    return False


def start_execution(
    cloud: Cloud,
    resource_group: str,
    job: str,
    *,
    resume: bool,
    template: Sequence[ContainerDef] | None = None,
    own_token: str | None = None,
    cancel: threading.Event | None = None,
) -> TesterRun:
    """A new execution (of `template` when given), or on resume the one still running."""
    run = executions.start(
        cloud, resource_group, job, template, resume=resume, own_token=own_token, cancel=cancel
    )
    return TesterRun(
        execution=run.execution, reused=run.reused, started=run.started, token=run.token, extras=run.extras
    )


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
    marker = checks.RESULT_MARKER
    executions.follow(
        cloud, resource_group, job, run, waiter, timeout=timeout, marker=marker, environment=environment
    )
    note = settle(cloud, resource_group, job, run, waiter)
    outcome = judge(run, lost=run.lost)
    return replace(outcome, exit_code_note=note) if outcome.exit_code is None else outcome


def _grace(run: TesterRun) -> float | None:
    """The result grace its result line says it stays for (None: not said, or no result line)."""
    try:
        return tester_result.parse_tester_output("\n".join(run.lines)).result_grace_s
    except tester_result.NoTesterResult:
        return None


def settle(cloud: Cloud, resource_group: str, job: str, run: TesterRun, waiter: Waiter) -> str | None:
    """After its result line, the tester's exit code when its execution ends within SETTLE_S; else
    why the code is absent (the document says so instead of a bare null).

    A tester that stays for a result grace is stopped here: its grace keeps its log readable for a
    reader that comes late, and this one has read the result line already. Stopping the execution
    ends the tester at once with its verdict as its exit code (its SIGTERM handler,
    templates/gpu-tester), so the platform states the code, and its GPU stops billing now rather
    than at teardown (a kept run has no teardown: it would bill the whole grace)."""
    if run.exit_code is not None:
        return None
    if run.stopped_by is None:  # the execution ended (or was lost) without a result line
        if run.info is not None and run.info.finished:
            return f"its execution ended {run.info.status} without an exit code in its status"
        return "its execution's end was not seen"
    grace = _grace(run)
    stopped = False
    if grace is not None and grace >= SETTLE_S and not waiter.cancel.is_set():
        try:
            cloud.stop_execution(resource_group, job, run.execution)
        except NotFound:
            return "its job was gone before its end was read"
        except AcaGpuError as exc:
            return (
                f"not stopped after its result line ({exc.message}); it stays {grace:g}s "
                f"({tester.GRACE_ENV}) and its verdict is its result line"
            )
        run.stopped = run.stopped or time.monotonic()
        stopped = True
    deadline = time.monotonic() + SETTLE_S
    while not waiter.cancel.is_set():
        info = executions.get(cloud, resource_group, job, run.execution)
        if info is not None and info.finished:
            run.info, run.ended = info, run.stopped or time.monotonic()
            if run.exit_code is not None:
                return None
            if stopped:
                return (
                    f"stopped after its result line (its {grace:g}s {tester.GRACE_ENV} was not needed); "
                    f"the platform stated no exit code for the stopped execution ({info.status}); "
                    "its verdict is its result line"
                )
            return f"its execution ended {info.status} without an exit code"
        if time.monotonic() >= deadline:
            break
        waiter.cancel.wait(min(waiter.interval, 0.2))
    after = " and its stop" if stopped else ""
    return (
        f"its execution had not ended {SETTLE_S:g}s after its result line{after}; "
        "its verdict is its result line"
    )


def judge(run: TesterRun, *, lost: str = "") -> TesterOutcome:
    """pass/fail from the result line and the exit code; `unavailable` when only transport failed."""
    info = run.info
    code = run.exit_code

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
        if run.running is None and run.first_line is None:  # nothing of it ever ran
            return out("timeout", f"the tester was never placed before its deadline ({said})")
        return out("timeout", f"the tester did not finish within its deadline ({said})")
    if code is None and status == "Failed":
        message = (info.message or info.reason) if info else None
        return out("fail", "the tester's execution failed" + (f": {message}" if message else ""))
    what = "exited 0" if code == 0 else f"ended {status or 'in an unknown state'}"
    why = f" ({lost})" if lost else ""
    return out("unavailable", f"the tester {what} but its {checks.RESULT_MARKER} line could not be read{why}")


def tester_verdict(outcome: TesterOutcome) -> Verdict:
    """The tester's outcome as its task's verdict: a pass is the answer; a fail is the GPU's (the
    tester ran and said so: final); a result lost in transport or a deadline is the platform's
    (not tried again: TESTER_RETRY, since a second tester costs minutes of GPU). The outcome is the
    value of every verdict: the pair reads it."""
    if outcome.status == "pass":
        return Verdict(None, value=outcome)
    if outcome.status == "fail":
        return Verdict(USER, "TesterFailed", outcome.reason, outcome.exit_code, value=outcome, retry=False)
    code = "TesterDeadline" if outcome.status == "timeout" else "ResultUnavailable"
    return Verdict(PLATFORM, code, outcome.reason, outcome.exit_code, value=outcome)


def unavailable_error(outcome: TesterOutcome, what: str = "tester") -> AcaGpuError:
    """What an outcome without a verdict means for the run: a lost result or a deadline. `what`
    names whose outcome it is (`acagpu run`'s container is no tester)."""
    if outcome.status == "timeout":
        code = "TesterDeadline" if what == "tester" else "ContainerDeadline"
        return WaitTimedOut(f"{what}: {outcome.reason}", code=code)
    return InfraError(f"{what} result unavailable: {outcome.reason}", code="ResultUnavailable")
