"""Tasks: a template + a deadline + a retry policy + an outcome, run under a concurrency limit.

A task is one unit of work that becomes one execution per attempt: shard k of N, the nvidia-smi
probe, the gpu-tester, a user's container. `TaskRunner` owns the one loop every task goes through:
start within the limit and the write budget, watch each attempt, judge how it ended and whose fault
it was, retry what the policy allows, and on cancel stop every attempt still running (billing
first). It schedules nothing itself: where and how an attempt runs is the `Backend`'s (ACA job
executions).

An attempt is watched one of two ways. Shards are many and say everything they have to say by
their exit code, so one listing a tick tells every shard's state and the runner judges it. The
probe, the tester and a single `run` each have a verdict in their lines (nvidia-smi's output, the
tester's result line, the user's console), so their task brings a `Watch`: a reader started with
the attempt that follows it and returns a `Verdict` (the answer, or whose fault its end was, and
whether another attempt can help). Both ends go through the same judgement of retries.

Whose fault an attempt's end was decides its retry:
- the user's: the container ran and exited non-zero (or ran past its deadline) — retried only
  with `RetryPolicy.retries` (and only for `retry_on_exit` codes when given);
- the platform's: never placed before the start deadline, BackoffLimitExceeded before its pull,
  a pull or create that stalls past the start deadline, a replica lost after it ran — retried
  without spending the user's retries, up to `platform_retries`, and reported as the platform's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from functools import partial

from aca_gpu.errors import AcaGpuError, NotFound, WaitTimedOut
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine.pacing import TokenBucket
from aca_gpu.workflow.engine.spend_cap import SpendCap
from aca_gpu.workflow.engine.task_records import (
    IMAGE_WAIT,
    PLACING,
    PLATFORM,
    REMOVED,
    USER,
    Attempt,
    Backend,
    Observation,
    RetryPolicy,
    Task,
    TaskState,
    Verdict,
    Watch,
    container_end,
    note_lost,
)

LOST_AFTER_S = 30.0  # an execution missing from the listing this long after its start is lost
START_SETTLE_S = 5.0  # after Ctrl-C, how long starts in flight may take to name their execution
SLOW_LOOK_S = 1.0  # a listing answered later than this hides when, in its wait, a start or end came


@dataclass(frozen=True)
class Deadlines:
    start_s: float  # from a start request to a running container (placement, pull, create)
    tick_s: float = 1.0  # how often the place is listed


class TaskRunner:
    """Runs `tasks` on `backend`: at most `limit` attempts at once (see the module doc)."""

    def __init__(
        self,
        backend: Backend,
        tasks: Sequence[Task],
        *,
        limit: int,
        policy: RetryPolicy,
        deadlines: Deadlines,
        bucket: TokenBucket,
        cancel: threading.Event,
        on_change: Callable[[TaskState, Attempt], None] | None = None,
        on_running: Callable[[TaskState, Attempt], None] | None = None,
        on_look: Callable[[], None] | None = None,
        starters: int = 8,
        watch: Watch | None = None,
        settle_s: float = 0.0,
        cap: SpendCap | None = None,
    ) -> None:
        """`watch`: every attempt is read by it instead of by the listing; `settle_s`: how long
        a cancel lets a watched attempt's reader record what its container did before the
        attempt is stopped (a container that exited keeps its own code); `cap`: the run's
        --max-cost, read at every look (spend_cap.py)."""
        self.cap = cap
        self.backend, self.policy, self.deadlines = backend, policy, deadlines
        self.limit, self.bucket, self.cancel = max(1, limit), bucket, cancel
        self.states = [TaskState(t) for t in tasks]
        self._by_token: dict[str, tuple[TaskState, Attempt]] = {}
        self._on_change = on_change or (lambda s, a: None)
        self._on_running = on_running or (lambda s, a: None)
        self._on_look = on_look or (lambda: None)  # after each look's ends and starts
        # starts run in daemon threads, at most `starters` at once: after Ctrl-C a start still
        # waiting out a 429 storm must never hold the process after its document
        self._starters = threading.BoundedSemaphore(max(1, starters))
        self._starting: dict[Future[str], tuple[TaskState, Attempt]] = {}
        self._lock = threading.Lock()
        self.errors: list[str] = []  # starts that failed for good (the attempt counts as the platform's)
        # why the place went under the runner (its job deleted: `down`, reap, the guard), if it did
        self.removed: str | None = None
        # tokens of starts that failed without an answer: if ARM started one after all, it is
        # stopped when a listing shows it (its shard was retried under a new token)
        self.orphans: dict[str, float] = {}  # token -> when its start failed
        self.started_at: list[float] = []  # monotonic time of every start request (the pacing record)
        self.watch, self.settle_s = watch, settle_s
        self._watching: dict[Future[Verdict], tuple[TaskState, Attempt]] = {}
        self._wake = threading.Event()  # a watched attempt's start or end: look now, not next tick

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> list[TaskState]:
        try:
            while not self.cancel.is_set():
                self._wake.clear()
                self._collect_starts()
                if self._done():
                    break
                if self.watch is None:
                    self._observe()
                    if self.removed is not None:  # nothing is left to look at or start in
                        self.stop_all(why=f"{REMOVED}: {self.removed}", settle=False)
                        break
                else:
                    self._collect_verdicts()
                    if self._done():  # the last verdict is in: no tick to wait out
                        break
                if self._capped():
                    break
                self._start_more()
                self._on_look()
                self._pause()
        finally:
            if self.cancel.is_set():
                self.stop_all()
            self._on_look()
        return self.states

    def _pause(self) -> None:
        """Until the next tick; a watched runner also wakes when an attempt started or ended, and
        reads the cancel (which a parent may set without waking this one) every 0.1 s."""
        if self.watch is None:
            self.cancel.wait(self.deadlines.tick_s)
            return
        until = time.monotonic() + self.deadlines.tick_s
        while not self.cancel.is_set() and not self._wake.is_set():
            left = until - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(left, 0.1))

    def _capped(self) -> bool:
        """--max-cost: stop what runs once the cap would pass by the next look, and end when no
        start may come any more and nothing runs (spend_cap.py)."""
        cap = self.cap
        if cap is None:
            return False
        running = self.in_flight()
        if not cap.must_stop(running) and (running or self._starting or cap.may_start()):
            return False
        cap.reached = True
        began = time.monotonic()
        self.stop_all(why="CostCapReached: stopped at --max-cost", settle=False)
        cap.stops_took_s = max(cap.stops_took_s or 0.0, time.monotonic() - began)
        return True

    def _done(self) -> bool:
        return all(s.state in ("succeeded", "failed") for s in self.states) and not self._starting

    def in_flight(self) -> int:
        return sum(1 for s in self.states if s.state == "running")

    # -- starts ---------------------------------------------------------------------------------
    def _start_more(self) -> None:
        now = time.monotonic()
        free = self.limit - self.in_flight()
        for state in self.states:
            if free <= 0 or self.cancel.is_set():
                return
            if state.state not in ("queued", "retrying") or state.not_before > now:
                continue
            if self.cap is not None and not self.cap.may_start():
                return  # the cap less one start's cost is reached: nothing new starts
            if not self.bucket.take():
                return
            attempt = Attempt(number=len(state.attempts) + 1, token=uuid.uuid4().hex[:16])
            state.attempts.append(attempt)
            state.state = "running"
            with self._lock:
                self._by_token[attempt.token] = (state, attempt)
            self.started_at.append(time.monotonic())
            # a daemon thread: a start stuck in a socket never holds the prompt
            future = spawn(
                partial(self._start_one, state.task, attempt.number, attempt.token), "acagpu-start"
            )
            if self.watch is not None:
                future.add_done_callback(lambda _: self._wake.set())
            self._starting[future] = (state, attempt)
            self._on_change(state, attempt)
            free -= 1

    def _start_one(self, task: Task, number: int, token: str) -> str:
        with self._starters:
            if self.cancel.is_set():
                raise WaitTimedOut(f"start of {task.label or task.index}: cancelled", code="Cancelled")
            return self.backend.start(task, number, token)

    def _collect_starts(self) -> None:
        for future in [f for f in self._starting if f.done()]:
            state, attempt = self._starting.pop(future)
            try:
                attempt.execution = future.result()
                extras = getattr(self.backend, "extras_of", None)
                if callable(extras):
                    attempt.extras += [e for e in extras(attempt.token) if e not in attempt.extras]
                clock = getattr(self.backend, "stream_clock", None)
                if callable(clock):
                    attempt.stream_clock = partial(clock, attempt.execution)
            except Exception as exc:
                if self.watch is not None:  # the Azure layer already resent what was safe to resend
                    self._judged(state, attempt, _failed("StartFailed", exc))
                    continue
                self._start_failed(state, attempt, exc)
                continue
            if self.watch is not None:
                watched = spawn(partial(self.watch, state.task, attempt), "acagpu-watch")
                watched.add_done_callback(lambda _: self._wake.set())
                self._watching[watched] = (state, attempt)

    def _start_failed(self, state: TaskState, attempt: Attempt, exc: Exception) -> None:
        """A shard's start that failed is the platform's: retried, and its token watched in case
        ARM started it after all. A programming or SDK error ends the attempt too; the run goes on."""
        if isinstance(exc, AcaGpuError):
            self.errors.append(exc.message)
            self.orphans[attempt.token] = time.monotonic()
            self._ended(state, attempt, PLATFORM, "StartFailed", exc.message, None)
        else:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self._ended(state, attempt, PLATFORM, "StartFailed", str(exc), None)

    def _collect_verdicts(self) -> None:
        """Watched attempts: a reader that came back ended its attempt with its verdict; one that
        raised ended it with that error, for good (a reader's failure is no reason to pay again)."""
        for future in [f for f in self._watching if f.done()]:
            state, attempt = self._watching.pop(future)
            try:
                verdict = future.result()
            except Exception as exc:
                verdict = _failed("WatchFailed", exc)
            self._judged(state, attempt, verdict)

    def _judged(self, state: TaskState, attempt: Attempt, verdict: Verdict) -> None:
        attempt.verdict = verdict
        self._ended(
            state, attempt, verdict.fault, verdict.code, verdict.why, verdict.exit_code, retry=verdict.retry
        )

    # -- watching -------------------------------------------------------------------------------
    def _observe(self) -> None:
        live = [(s, a) for s in self.states if s.state == "running" and (a := s.current) and a.execution]
        if not live and not self.orphans:
            return
        asked = time.monotonic()
        try:
            seen = self.backend.observe({a.token for _, a in live} | set(self.orphans))
        except NotFound as exc:  # the job is gone: a listing again would wait out every deadline
            self._removed(live, exc.message)
            return
        except AcaGpuError as exc:  # a listing that failed is tried again next tick
            self.errors.append(f"listing: {exc.message}")
            for _, attempt in live:  # a start or end in this gap is known only to the next look
                attempt.troubled += 1
            return
        # what a look lists is the place somewhere between its question (`asked`) and its answer
        # (`now`): a listing of pages can take seconds under load. So a start or end lies after
        # the question of the look before it and before the answer of the look after it.
        now = time.monotonic()
        slow = now - asked > SLOW_LOOK_S  # a start or end it sees lies somewhere in its wait
        self._stop_duplicates(seen)
        for token, failed_at in list(self.orphans.items()):
            if token not in seen:
                if now - failed_at > 2 * LOST_AFTER_S:
                    del self.orphans[token]  # never listed: the start did not happen
                continue
            execution, orphan = seen[token]
            if orphan.status not in ("Succeeded", "Failed", "Stopped", "Degraded"):
                self._stop_quietly(execution)  # started after all, after its shard was retried
            else:
                del self.orphans[token]
                if orphan.status == "Succeeded":
                    self.errors.append(f"a start that failed ran after all and succeeded: {execution}")
        for state, attempt in live:
            found = seen.get(attempt.token)
            if found is None:
                attempt.missing_since = attempt.missing_since or now
                if now - attempt.started > LOST_AFTER_S and now - attempt.missing_since > LOST_AFTER_S:
                    self._ended(
                        state, attempt, PLATFORM, "ExecutionLost", "the execution is no longer listed"
                    )
                continue
            attempt.missing_since = None
            attempt.troubled += slow
            self._judge(state, attempt, found[1], asked, now)

    def _removed(self, live: list[tuple[TaskState, Attempt]], message: str) -> None:
        """The place's job was deleted under the runner (`acagpu down --run-id` from another shell,
        reap, the guard): its attempts are gone with it, ended by the platform for good (a retry
        could only fail to start), and the runner ends instead of listing a job that is no more."""
        self.removed = f"the run's job was deleted while its shards ran ({message})"
        for state, attempt in live:
            self._ended(state, attempt, PLATFORM, REMOVED, self.removed, retry=False)

    def _stop_duplicates(self, seen: Mapping[str, tuple[str, Observation]]) -> None:
        """A start ARM ran twice made two executions with one token: the one the start did not
        answer with is stopped if it still runs (a shard never runs twice) and named in its attempt."""
        dup = getattr(self.backend, "duplicates", None)
        for token, execution, finished in dup() if callable(dup) else []:
            with self._lock:
                owner = self._by_token.get(token)
            if owner is not None and execution not in owner[1].extras:
                owner[1].extras.append(execution)
            if not finished:
                self._stop_quietly(execution)

    def _judge(self, state: TaskState, attempt: Attempt, seen: Observation, asked: float, now: float) -> None:
        where = seen.states[-1] if seen.states else ""
        attempt.last_state = where or attempt.last_state
        ran = where == "Running" or seen.status == "Succeeded" or seen.exit_code not in (None, -1)
        if attempt.running is None and ran:  # a replica "Terminated" with no code never ran
            note_lost(attempt, "its start", "running")
            # it started between the last look that saw it waiting and this one: the middle
            before = attempt.looked if attempt.looked is not None else attempt.started
            after = now
            attempt.start_span = (before, now)
            if seen.status in ("Succeeded", "Failed", "Stopped", "Degraded"):  # ran and ended unseen:
                after = container_end(before, None, seen.end_time, now)  # it started before it ended
            attempt.running = (before + after) / 2
            attempt.status = "running"
            self._on_running(state, attempt)
            self._on_change(state, attempt)
        elif attempt.running is None:
            attempt.looked = asked
            attempt.troubled = 0  # steady: nothing happened in the gap
        if where == "Running" and seen.status not in ("Succeeded", "Failed", "Stopped", "Degraded"):
            attempt.seen_running = asked
            attempt.troubled = 0
        if seen.status in ("Succeeded", "Failed", "Stopped", "Degraded"):
            self._finished(state, attempt, seen, now)
            return
        if attempt.running is None and now - attempt.started > self.deadlines.start_s:
            placed = where not in PLACING
            code = "PullStalled" if placed else "NeverPlaced"
            why = f"not running {self.deadlines.start_s:.0f}s after its start ({where or 'no replica'})"
            attempt.stopped_by_us = True
            self._stop_quietly(attempt.execution)
            self._ended(state, attempt, PLATFORM, code, why, None)

    def _finished(self, state: TaskState, attempt: Attempt, seen: Observation, now: float) -> None:
        attempt.arm_times = (seen.start_time, seen.end_time)
        if attempt.running is not None:
            note_lost(attempt, "its end", "ended")
            # it ended after the last look that saw it running (else after its start) and by now
            low = attempt.seen_running
            if low is None:
                low = attempt.start_span[0] if attempt.start_span is not None else attempt.started
            attempt.end_span = (low, now)
            attempt.run_end = container_end(attempt.running, attempt.seen_running, seen.end_time, now)
        said = " ".join(filter(None, (seen.reason,)))
        code = seen.exit_code
        if seen.status == "Succeeded" and code in (None, 0):
            if attempt.running is None:  # pragma: no cover - `_judge` set it (Succeeded ran)
                attempt.running = time.monotonic()
            self._ended(state, attempt, None, None, None, 0)
        elif code not in (None, 0, -1):
            self._ended(state, attempt, USER, "ExitCode", f"exited with code {code}", code)
        elif "deadline" in said.lower() and attempt.running is not None:
            self._ended(state, attempt, USER, "DeadlineExceeded", "ran past --max-minutes", None)
        elif attempt.running is not None:
            self._ended(
                state, attempt, PLATFORM, "ReplicaLost", said or f"ended {seen.status} with no exit code"
            )
        elif attempt.last_state in IMAGE_WAIT or "pull" in said.lower():
            self._ended(
                state, attempt, USER, "ImagePullFailed", said or "its image could not be pulled", None
            )
        else:
            why = said or f"ended {seen.status} before its container ran"
            self._ended(state, attempt, PLATFORM, "BackoffLimitExceeded" if "backoff" in why.lower()
                        else "NeverRan", why, None)  # fmt: skip

    def _ended(
        self,
        state: TaskState,
        attempt: Attempt,
        fault: str | None,
        code: str | None,
        why: str | None,
        exit_code: int | None = None,
        *,
        retry: bool = True,
    ) -> None:
        attempt.ended = attempt.ended or time.monotonic()
        attempt.exit_code, attempt.fault = exit_code, fault
        attempt.reason = f"{code}: {why}" if code and why else (code or why)
        attempt.status = "succeeded" if fault is None and code is None else "failed"
        if attempt.status == "succeeded":
            state.state = "succeeded"
        elif not retry:
            state.state = "failed"
        elif fault == PLATFORM and state.platform_retries < self.policy.platform_retries:
            state.platform_retries += 1
            self._retry(state)
        elif (
            fault == USER
            and state.user_retries < self.policy.retries
            and (code != "ExitCode" or self.policy.user_retryable(exit_code))
            and code != "ImagePullFailed"
        ):
            state.user_retries += 1
            self._retry(state)
        else:
            state.state = "failed"
        self._on_change(state, attempt)

    def _retry(self, state: TaskState) -> None:
        state.state = "retrying"
        tries = len(state.attempts)
        state.not_before = time.monotonic() + min(30.0, self.policy.backoff_s * tries)

    # -- the end --------------------------------------------------------------------------------
    def _stop_quietly(self, execution: str | None) -> None:
        if execution is None:
            return
        try:
            self.backend.stop(execution)
        except AcaGpuError as exc:
            self.errors.append(f"stop {execution}: {exc.message}")

    def stop_all(self, why: str = "Interrupted: stopped by Ctrl-C", settle: bool = True) -> None:
        """Cancel: every attempt still running is stopped, side by side (billing first); the job's
        delete in teardown stops whatever a stop here could not. `why`: Ctrl-C, or the cost cap,
        which stops at once (`settle` False: no reader is given time first, the cap is money)."""
        in_flight = dict(self._starting)
        futures.wait(list(in_flight), timeout=START_SETTLE_S)  # an answer on its way names its execution
        for future, (state, attempt) in in_flight.items():
            try:
                attempt.execution = future.result(timeout=0) if future.done() else None
            except Exception:
                attempt.execution = None
            if attempt.execution is None:  # never answered, or refused: cancelled, not failed
                attempt.ended, attempt.status = attempt.ended or time.monotonic(), "cancelled"
                attempt.reason = "Interrupted: Ctrl-C while its start was in flight"
                state.state = "cancelled"  # its job's delete stops it should ARM have started it
        self._starting.clear()
        if self._watching and self.settle_s > 0 and settle:  # each reader records how its container ended
            futures.wait(list(self._watching), timeout=self.settle_s)
        for read in [f for f in self._watching if f.done()]:
            state, attempt = self._watching.pop(read)
            with suppress(Exception):
                attempt.verdict = read.result()
        running = [(s, a) for s in self.states if s.state == "running" and (a := s.current) and a.execution]
        with ThreadPoolExecutor(max_workers=16, thread_name_prefix="acagpu-stop") as pool:
            list(pool.map(lambda sa: self._stop_quietly(sa[1].execution), running))
        now = time.monotonic()
        for state, attempt in running:  # stopped, not failed: nothing of theirs went wrong
            attempt.ended, attempt.stopped_by_us = attempt.ended or now, True
            attempt.status, attempt.reason = "stopped", why
            state.state = "stopped"
        for state in self.states:
            if state.state in ("queued", "retrying"):
                state.state = "cancelled"


def _failed(code: str, exc: Exception) -> Verdict:
    """An attempt ended by an error (its start refused, its reader failed): not retried."""
    why = exc.message if isinstance(exc, AcaGpuError) else f"{type(exc).__name__}: {exc}"
    return Verdict(PLATFORM, code, why, error=exc, retry=False)
