"""One job execution with a template of its own: start it, follow its log, read its exit code.

Jobs_Start takes a `JobExecutionTemplate` (the Microsoft.App REST spec, stable since 2023-05-01): one
job runs a different image, command and environment at every start, with no PUT. The nvidia-smi probe of
a warm run, the tester and a user's own workload are all executions started here and followed by
`follow`; what they mean is the caller's business (`probe_job.py` reads nvidia-smi, `tester_run.py`
judges a result line).

The exit code comes from the execution's `detailedStatus`, never from the log: a log stream can drop,
and ACA removes a finished replica (and its log) soon after it exits.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace

from aca_gpu.errors import AcaGpuError, NotFound, WaitTimedOut
from aca_gpu.models import Cloud, ContainerDef, ExecutionInfo, MarkedStart
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import lifetime as lives
from aca_gpu.workflow.engine.replicas import event_reasons_of

LOG_RECONNECTS = 20
FINAL_STATUS_WAIT_S = 20.0  # how long an ended stream may wait for the execution's final status
TAIL = 300  # the service's largest tailLines
# a container that ran cost something however short: the least a document's three decimals show,
# never 0 (a container of 20 ms is billed; no look or stream can time it)
RAN_AT_LEAST_S = 0.001
# every execution acagpu starts with a template of its own carries one of these in its env, read back
# from the execution: the start is matched to its execution by it, never by listing before and after
# (ambiguous once starts overlap, and a lost answer is looked up by it before the start is sent again)
ATTEMPT_TOKEN = "ACAGPU_ATTEMPT_ID"


@dataclass
class ExecutionRun:
    """One execution being followed; times are monotonic seconds, for the measured GPU lifetime."""

    execution: str
    reused: bool = False
    started: float = field(default_factory=time.monotonic)
    running: float | None = None  # when its container was first seen running
    first_line: float | None = None  # when its first log line arrived
    ended: float | None = None
    stopped: float | None = None  # when teardown's delete of its job was accepted: it bills until then
    never_ran: bool = False  # the platform refused the container: nothing of it billed
    lines: list[str] = field(default_factory=list)
    info: ExecutionInfo | None = None
    stopped_by: str | None = None  # the line that met the caller's stop rule, if one did
    lost: str = ""  # the last stream failure, for a caller that could not read what it needed
    gone: float | None = None  # when its job was found deleted under it (it billed until then)
    attached_late: bool = False  # its log stream came after its container started: `running` is late
    token: str | None = None  # its ATTEMPT_TOKEN (None: started with its job's own template)
    extras: tuple[str, ...] = ()  # other executions its start made (stopped): `MarkedStart.extras`
    drops: int = 0  # how often its followed log stream failed (an end seen after a drop is late)
    status_misses: int = 0  # reads of its status that failed (its end was seen that much later)
    platform_run_s: float | None = None  # its container's life by the platform's events, if read
    exit_by_close: bool = False  # its end is the close of the stream that brought its last lines

    @property
    def seconds(self) -> float:
        """The billed figure: the measured lifetime, bounded by the platform (`lifetime`)."""
        return self.lifetime.seconds

    @property
    def lifetime(self) -> lives.Lifetime:
        """`measured_seconds` judged: bounded by the execution's own start and end times, and,
        when faults cost the client its evidence (a stream dropped, status reads failed, a start
        no look or stream saw), the platform's events instead, or an estimate that says so."""
        measured = self.measured_seconds
        finished = self.info is not None and self.info.finished
        if self.never_ran or not finished or self.info is None:
            return lives.Lifetime(measured)
        window = lives.arm_window(self.info.start_time, self.info.end_time)
        lost = []
        unseen = self.running is None and self.first_line is None and self.exit_code is not None
        if unseen:
            lost.append("its container's start was not seen (no look or stream saw it running)")
            if self.platform_run_s is None and window is not None:
                measured = window  # the only bound known: an upper one, said so
                lost[-1] += ", so the execution's start-to-end by ARM is taken, an upper bound"
        if self.attached_late and not unseen:
            lost.append("its log stream attached after its container started, so its start was seen late")
        if self.drops and not self.exit_by_close:
            lost.append(f"its log stream dropped {self.drops} time(s), so its end was seen late")
        if self.status_misses and not self.exit_by_close:
            lost.append(f"{self.status_misses} read(s) of its status failed, so its end was seen late")
        return lives.judged(measured, lost=lost, window=window, events_s=self.platform_run_s)

    @property
    def measured_seconds(self) -> float:
        """Measured replica lifetime: from its container seen running (else its first line) to its
        end when the execution had finished, else to the delete by teardown (a tester lingers,
        billed, after its result line), else to now. An execution never seen running that printed
        nothing had no replica to bill (a region abandoned before one was placed): 0, not the time
        since the start request."""
        began = self.running or self.first_line
        if self.never_ran:
            return 0.0
        if began is None:  # ended before any look or stream saw it: if it ran, it cost something
            return RAN_AT_LEAST_S if self.exit_code is not None else 0.0
        finished = self.info is not None and self.info.finished and self.ended is not None
        end = (self.ended if finished else None) or self.stopped or self.gone or self.ended
        end = end or time.monotonic()
        return max(0.0, end - began)

    @property
    def exit_code(self) -> int | None:
        """The container's exit code (the first non-zero one), None until the execution has ended
        (a running execution's code is a placeholder, -1 on Azure)."""
        codes = self.info.exit_codes if self.info and self.info.finished else ()
        return next((c for c in codes if c != 0), codes[0] if codes else None)


def new_token() -> str:
    return uuid.uuid4().hex[:16]


def marked(containers: Sequence[ContainerDef], token: str) -> list[ContainerDef]:
    """`containers` with `ATTEMPT_TOKEN=token` in each one's env."""
    return [replace(c, env={**c.env, ATTEMPT_TOKEN: token}) for c in containers]


def start_marked(
    cloud: Cloud,
    resource_group: str,
    job: str,
    containers: Sequence[ContainerDef] | None,
    token: str,
    cancel: threading.Event | None = None,
) -> MarkedStart:
    """The one way acagpu starts an execution it can find again (the probe, the tester, a workload,
    every shard attempt): its env carries `token`, and the execution is the start's answer or, when
    the answer was lost, the one whose template carries the token (any other that carries it too
    was stopped: `extras`). Without `containers` the job's own template runs, which must carry the
    token already. `cancel` (Ctrl-C) ends a start still waiting to be sent again."""
    template = marked(containers, token) if containers else None
    return cloud.start_job_marked(
        resource_group, job, template, key=ATTEMPT_TOKEN, token=token, cancel=cancel
    )


def start(
    cloud: Cloud,
    resource_group: str,
    job: str,
    containers: Sequence[ContainerDef] | None = None,
    *,
    resume: bool = False,
    own_token: str | None = None,
    cancel: threading.Event | None = None,
) -> ExecutionRun:
    """A new execution running `containers`, started by a token (`start_marked`).

    On `resume`, an execution of this job that is still running is followed instead of paying twice.
    With `containers`, their template carries `own_token` (a task runner's attempt token) or a new
    one. Without `containers` the job's own template runs: with `own_token` when that template carries
    it (a job made for this one start: a container with mounts, which the spec's execution template
    cannot carry), else told by the executions listed before and after the start (`acagpu test` on
    a kept run, whose template only its job knows).
    """
    if resume:
        for info in cloud.list_executions(resource_group, job):
            if not info.finished and info.status not in (None, "Unknown"):
                return ExecutionRun(execution=info.name, reused=True)
    if not containers and own_token is None:
        return ExecutionRun(execution=cloud.start_job(resource_group, job, None))
    token = own_token or new_token()
    started = start_marked(cloud, resource_group, job, containers, token, cancel)
    return ExecutionRun(execution=started.execution, token=token, extras=started.extras)


def stopper(
    cloud: Cloud, resource_group: str, job: str, runs: Mapping[str, ExecutionRun]
) -> Callable[[str], None]:
    """How a task's runner stops one of `runs` (billing first: Ctrl-C, or its pair's verdict is
    known): its replica bills until the stop is accepted, so its measured life ends there. One
    whose job went already (released, or torn down) is stopped."""

    def stop(execution: str) -> None:
        with suppress(NotFound):
            cloud.stop_execution(resource_group, job, execution)
        run = runs.get(execution)
        if run is not None:
            run.stopped = run.stopped or time.monotonic()

    return stop


def get(cloud: Cloud, resource_group: str, job: str, execution: str) -> ExecutionInfo | None:
    try:
        return cloud.get_execution(resource_group, job, execution)
    except AcaGpuError:
        return None


def _fresh(known: list[str], replay: list[str], *, ended: bool) -> list[str] | None:
    """The lines of a reconnect's replay that are new, or None while that cannot be told yet.

    A replay is the log's last TAIL lines, so it starts at some index `s` of `known`; every start
    the replay agrees with stays a candidate, and the earliest one (the largest overlap) wins once
    the replay has gone past all of them. Identical lines printed twice therefore both stay.
    """
    candidates = [
        s
        for s in range(max(0, len(known) - TAIL), len(known) + 1)
        if known[s : s + len(replay)] == replay[: len(known) - s]
    ]
    if not candidates:
        return list(replay)  # more than TAIL lines went by unseen: all of this is new
    if not ended and any(len(replay) < len(known) - s for s in candidates):
        return None
    return replay[len(known) - candidates[0] :]


def _read(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: ExecutionRun,
    *,
    follow: bool,
    timeout: float,
    stop_when: Callable[[str], bool] | None,
    on_line: Callable[[str], None] | None,
) -> None:
    """One connection to the execution's log; what a reconnect replays is matched and skipped."""
    known, replay = list(run.lines), []
    deciding = bool(known)

    def emit(lines: list[str]) -> None:
        for text in lines:
            run.lines.append(text)
            if on_line is not None:
                on_line(text)
            if stop_when is not None and run.stopped_by is None and stop_when(text):
                run.stopped_by = text

    def seen_running(at: float | None = None) -> None:
        run.running = run.running or (at if at is not None else time.monotonic())

    stream = cloud.job_logs(
        resource_group,
        job,
        run.execution,
        follow=follow,
        tail=TAIL,
        stop_when=stop_when,
        timeout=timeout,
        on_running=seen_running,
    )
    try:
        for line in stream:
            if run.first_line is None:
                run.first_line = time.monotonic()
            if not deciding:
                emit([line])
                continue
            replay.append(line)
            fresh = _fresh(known, replay, ended=False)
            if fresh is not None:
                deciding = False
                emit(fresh)
    finally:
        if deciding and replay:
            emit(_fresh(known, replay, ended=True) or [])


def follow(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: ExecutionRun,
    waiter: Waiter,
    *,
    timeout: float,
    stop_when: Callable[[str], bool] | None = None,
    on_line: Callable[[str], None] | None = None,
    environment: str | None = None,
    marker: str | None = None,
) -> ExecutionRun:
    """Follow `run` until a line meets `stop_when` (or contains `marker`), or until the execution
    ended (then its final status, with the exit codes, is in `run.info`). Every line reaches
    `on_line` once, in order.

    A dropped stream is reconnected (bounded); the deadline is WaitTimedOut naming the environment's
    latest events; the run's cancel (Ctrl-C) ends the wait as WaitTimedOut("Cancelled").
    """
    if marker is not None and stop_when is None:
        stop_when = lambda line: marker in line  # noqa: E731 - the common stop rule
    deadline = time.monotonic() + timeout
    failures = 0
    while run.stopped_by is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            why = event_reasons_of(cloud, resource_group, environment) if environment else []
            what = f"timed out after {timeout:.0f}s waiting for execution {run.execution} of {job}"
            raise WaitTimedOut("; ".join([what, *why]))
        if waiter.cancel.is_set():
            raise WaitTimedOut(f"stopped following {job}: cancelled", code="Cancelled")
        try:
            _read(
                cloud,
                resource_group,
                job,
                run,
                follow=True,
                timeout=remaining,
                stop_when=stop_when,
                on_line=on_line,
            )
        except WaitTimedOut as exc:
            why = event_reasons_of(cloud, resource_group, environment) if environment else []
            raise WaitTimedOut("; ".join([exc.message, *why]), code=exc.code) from exc
        except AcaGpuError as exc:  # a dropped or refused stream: reconnect, bounded
            failures += 1
            run.drops += 1
            run.lost = exc.message
            if failures > LOG_RECONNECTS:
                break
        if run.stopped_by is not None:
            break
        run.info = get(cloud, resource_group, job, run.execution)
        run.status_misses += run.info is None
        if run.info is not None and run.info.finished:
            try:  # one last plain read, in case the stream dropped just before the end
                _read(
                    cloud,
                    resource_group,
                    job,
                    run,
                    follow=False,
                    timeout=30.0,
                    stop_when=stop_when,
                    on_line=on_line,
                )
            except AcaGpuError as exc:
                run.lost = exc.message
            break
        waiter.cancel.wait(waiter.interval)
    run.ended = time.monotonic()
    if run.stopped_by is None:
        run.info = final_status(cloud, resource_group, job, run, waiter)
    return run


def final_status(
    cloud: Cloud, resource_group: str, job: str, run: ExecutionRun, waiter: Waiter
) -> ExecutionInfo | None:
    """The execution's status once it has ended (a stream can end a moment before the status does)."""
    deadline = time.monotonic() + FINAL_STATUS_WAIT_S
    info = run.info
    while True:
        read = get(cloud, resource_group, job, run.execution)
        run.status_misses += read is None
        info = read or info
        if info is not None and info.finished:
            return info
        if time.monotonic() >= deadline or waiter.cancel.is_set():
            return info
        waiter.cancel.wait(min(waiter.interval, 1.0))
