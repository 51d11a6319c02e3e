"""What a task is and what is known of each of its attempts: the records `TaskRunner` keeps.

A task (`Task`, under a `RetryPolicy`) becomes one execution per attempt (task_runner.py). An
`Attempt` is what the looks, its log stream and the platform's events said of that execution, and
from them its measured life and billed GPU-seconds (`engine/lifetime.py` judges how far those can be
trusted); `TaskState` is a task's attempts and where it stands. A watched task's reader (`Watch`)
ends its attempt with a `Verdict`; `Backend` is where attempts run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aca_gpu.naming import parse_iso_utc
from aca_gpu.workflow.engine import lifetime as lives
from aca_gpu.workflow.engine.executions import RAN_AT_LEAST_S

USER, PLATFORM = "user", "platform"
PLACING = ("", "AssigningReplica", "Pending", "Scheduling")  # no node yet
PULLING = ("PullingImage", "Creating", "ContainerCreating", "Starting")  # placed, not running yet
IMAGE_WAIT = ("ImagePullBackOff", "ErrImagePull", "Waiting")  # a pull that failed, waiting to retry
# an attempt whose job was deleted under it (`TaskRunner._removed`): a single run's code for it too
REMOVED = "JobDeleted"


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 0  # the user's: attempts after a container that ran and failed
    retry_on_exit: frozenset[int] | None = None  # only these exit codes (None: any failure)
    platform_retries: int = 3  # the platform's failures, never spending `retries`
    backoff_s: float = 1.0  # before a retry, times the attempts so far (capped at 30 s)

    def user_retryable(self, code: int | None) -> bool:
        if self.retry_on_exit is None:
            return True
        return code is not None and code in self.retry_on_exit


@dataclass(frozen=True)
class Task:
    """One unit of work: its index, the env its template adds, and what it is called."""

    index: int
    env: Mapping[str, str]
    label: str = ""


@dataclass(frozen=True)
class Verdict:
    """How a watched attempt ended, as its task's reader judged it.

    `fault` None is an answer (`value`); otherwise the attempt failed on the user's side (the
    image, the command, the GPU it found) or the platform's (a reading lost in transport). `retry`
    False ends the task whatever the policy allows: the verdict is final (a refused image, a
    deadline already waited out). `error` is what the task's caller raises when this was its last
    attempt."""

    fault: str | None
    code: str | None = None
    why: str | None = None
    exit_code: int | None = None
    error: Exception | None = None
    retry: bool = True
    value: Any = None


@dataclass
class Observation:
    """What the place says of one attempt now (one listing)."""

    status: str | None  # the execution's: Running, Succeeded, Failed, Stopped, ...
    states: tuple[str, ...] = ()  # its replica container's detailed status
    exit_code: int | None = None
    reason: str | None = None
    end_time: str | None = None  # the execution's own endTime (ARM's clock, whole seconds)
    start_time: str | None = None  # and its startTime: with endTime, the bound on its replica's life


class Backend(Protocol):
    """Where attempts run. A backend of watched tasks lists nothing (`observe` gives {})."""

    def start(self, task: Task, attempt: int, token: str) -> str:
        """Start one attempt of `task` whose template env carries `token`; return its execution."""

    def observe(self, live: Collection[str] = ()) -> Mapping[str, tuple[str, Observation]]:
        """token -> (execution, what it is now), for every attempt the place lists (at least
        those whose tokens are in `live`: the backend may stop listing once it saw them)."""

    def stop(self, execution: str) -> None:
        """Stop one attempt (it stops billing); harmless on one that ended."""


@dataclass
class Attempt:
    number: int
    token: str
    execution: str | None = None
    started: float = field(default_factory=time.monotonic)
    running: float | None = None  # when its container started (estimated): it bills from here
    ended: float | None = None  # when the client saw it end (or stopped it)
    run_end: float | None = None  # when its container ended, from the execution's own endTime
    looked: float | None = None  # the last look that saw it not running yet (else its start request)
    seen_running: float | None = None  # the last look that saw it still running
    last_state: str = ""
    exit_code: int | None = None
    # starting, running, succeeded, failed; stopped (by Ctrl-C), cancelled (Ctrl-C, start in flight)
    status: str = "starting"
    fault: str | None = None  # user | platform (of a failed attempt)
    reason: str | None = None
    stopped_by_us: bool = False
    missing_since: float | None = None
    verdict: Verdict | None = None  # a watched attempt's end, as its reader judged it
    # other executions that carried its token (its start run twice by ARM): each stopped, if it
    # still ran when found, and named here; never billed as the attempt's own
    extras: list[str] = field(default_factory=list)
    # (start, end) of its container as its log stream saw them (the service accepting the stream,
    # and closing it at the exit), when the backend follows it: the same lifetime a single run has
    stream_clock: Callable[[], tuple[float | None, float | None]] | None = field(default=None, repr=False)
    troubled: int = 0  # listings that failed or answered slowly since a look last saw it steady
    lost: list[str] = field(default_factory=list)  # what faults cost its measure (engine/lifetime.py)
    arm_times: tuple[str | None, str | None] = (None, None)  # its execution's (startTime, endTime)
    # where the looks put its container's start and end: (after, before), monotonic seconds
    start_span: tuple[float, float] | None = None
    end_span: tuple[float, float] | None = None
    # its replica's (ContainerStarted, ContainerTerminated) by the platform's events (epoch, whole
    # seconds), when they were read; else why not, for a figure they were wanted for
    events: tuple[float, float] | None = None
    events_missing: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, (self.ended or time.monotonic()) - self.started)

    @property
    def gpu_seconds(self) -> float:
        """The billed figure: the measured life, bounded by the platform (`lifetime`)."""
        return self.lifetime.seconds

    @property
    def lifetime(self) -> lives.Lifetime:
        """`measured_seconds` judged (`engine/lifetime.py`): within its execution's own start and
        end times, and said to be an estimate where listings failed or came slowly around its
        start or end and its log stream could not stand in."""
        if self.running is None:
            return lives.Lifetime(0.0)
        window = lives.arm_window(*self.arm_times)
        lost = self.lost_evidence()
        events_s = None
        if self.events is not None and lost:  # each moment within its second, narrowed by the looks
            events_s = lives.within_events(self.events, *self._spans())
        elif self.events is not None:  # measured: held within a second of the events, as a run's
            events_s = self.events[1] - self.events[0]
        elif lost and self.events_missing:
            lost.append(self.events_missing)
        return lives.judged(self.measured_seconds, lost=lost, window=window, events_s=events_s)

    def lost_evidence(self) -> list[str]:
        """What faults cost its measure: empty when the looks and its stream saw it all."""
        lost = list(self.lost)
        if self.stream_clock is not None and self.run_end is not None and not self._times()[1]:
            lost.append(  # followed, but its stream did not see the exit: the looks' precision only
                "its log stream did not see its exit (it dropped, or its status could not be read), "
                "so its end is ARM's whole-second endTime between two looks"
            )
        return lost

    def _spans(self) -> tuple[lives.Span | None, lives.Span | None]:
        """Its start and end as its stream saw them, else as the looks bound them, on the wall
        clock (the events' clock)."""
        wall = time.time() - time.monotonic()

        def on_wall(seen: float | None, span: tuple[float, float] | None) -> lives.Span | None:
            low, high = (seen, seen) if seen is not None else span or (None, None)
            return None if low is None or high is None else (low + wall, high + wall)

        began, exited = self._times()
        return on_wall(began, self.start_span), on_wall(exited, self.end_span)

    def _times(self) -> tuple[float | None, float | None]:
        """(start, end) its followed log stream witnessed and the looks allow; None where not."""
        if self.stream_clock is None or self.running is None:
            return None, None
        seen_end = self.ended or time.monotonic()
        end = self.run_end if self.run_end is not None else seen_end
        began, exited = self.stream_clock()
        start = began if began is not None and self.started <= began <= end else None
        # a look that saw it still running after the stream closed: that close was no exit
        late_look = self.seen_running is not None and exited is not None and exited < self.seen_running
        if (
            exited is None
            or late_look
            or not (self.running if start is None else start) <= exited <= seen_end
        ):
            exited = None
        return start, exited

    @property
    def measured_seconds(self) -> float:
        """The container's life, not the looks: the client lists once a tick, so "first seen
        running" to "first seen ended" rounds every attempt up or down to whole ticks (a 2 s shard
        at 2 s ticks read 4 s). The start is the middle of the two looks around it and the end the
        execution's own endTime (see `_run_end`), unless its followed log stream saw them first: the
        service accepting the stream is the start, and its close after the last line the exit (a
        look on a busy machine comes seconds late; the stream is held open). A stream time outside
        what the looks allow is not taken."""
        if self.running is None:
            return 0.0
        seen_end = self.ended or time.monotonic()
        end = self.run_end if self.run_end is not None else seen_end
        began, exited = self._times()
        start = began if began is not None else self.running
        return max(RAN_AT_LEAST_S, (exited if exited is not None else end) - start)  # it ran: never 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "execution": self.execution,
            "status": self.status,
            "fault": self.fault,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
            "gpu_seconds": round(self.gpu_seconds, 3),
            # from the start request to the container first seen running (placement, pull, create)
            "start_s": None if self.running is None else round(self.running - self.started, 3),
            # the start request on the wall clock (epoch seconds): where it sits on a Gantt chart
            "started_at": round(time.time() - (time.monotonic() - self.started), 3),
            "extra_executions": list(self.extras),
        }


@dataclass
class TaskState:
    task: Task
    attempts: list[Attempt] = field(default_factory=list)
    state: str = "queued"  # queued, running, retrying, succeeded, failed
    user_retries: int = 0
    platform_retries: int = 0
    not_before: float = 0.0  # a retry waits its backoff

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def gpu_seconds(self) -> float:
        return sum(a.gpu_seconds for a in self.attempts)

    @property
    def verdict(self) -> Verdict | None:
        """The last attempt's verdict (a watched task): its answer, or what ended it."""
        return self.attempts[-1].verdict if self.attempts else None


# A task's own reader of one attempt (its execution is known): it follows it and says how it
# ended. It runs in a daemon thread of its own and must end when the runner's cancel is set.
Watch = Callable[[Task, Attempt], Verdict]


def note_lost(attempt: Attempt, what: str, seen: str) -> None:
    """What faults cost an attempt's measure: a start or end seen by a look after listings failed
    or answered slowly is known only to within that gap, unless its log stream saw it."""
    if not attempt.troubled:
        return
    began, exited = attempt.stream_clock() if attempt.stream_clock is not None else (None, None)
    if (began if what == "its start" else exited) is not None:
        return  # the stream saw it: the looks' gap does not matter
    attempt.lost.append(
        f"{what} was seen {seen} after {attempt.troubled} listing(s) failed or answered late, and "
        "no log stream saw it: known only to within that gap"
    )


def container_end(running: float, seen_running: float | None, end_time: str | None, now: float) -> float:
    """When the container ended, on this clock: within the second of the execution's own endTime
    (ARM gives whole seconds) and between the last look that saw it running and this one, the
    middle of both (a skewed clock moves it no further than the looks allow); without an endTime,
    the middle of the two looks."""
    earliest = max(running, seen_running) if seen_running is not None else running
    end = parse_iso_utc(end_time or "")
    if end is None:
        return (earliest + now) / 2
    second = end.timestamp() - (time.time() - time.monotonic())  # it ended within [second, +1)
    low, high = max(earliest, second), min(now, second + 1.0)
    if low <= high:
        return (low + high) / 2
    return min(now, max(earliest, second + 0.5))  # the clocks disagree: the looks win
