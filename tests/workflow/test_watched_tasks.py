"""The task runner's rules for a watched task (the probe, the tester, a single run): a reader per
attempt says how it ended, and the runner alone decides what follows.

The readers here are scripted verdicts; `test_single_tasks.py` runs the real probe and tester
readers, and `tests/e2e/test_pair_verdict_stops_tester.py` the whole of `up`.
"""

from __future__ import annotations

import threading
import time

import pytest

from aca_gpu.errors import ContainerRefused, InfraError, WaitTimedOut
from aca_gpu.workflow.engine.pacing import TokenBucket
from aca_gpu.workflow.engine.single_task import answer, run_task
from aca_gpu.workflow.engine.task_records import (
    PLATFORM,
    USER,
    Attempt,
    RetryPolicy,
    Task,
    TaskState,
    Verdict,
)


class Place:
    """Starts number executions ex-1, ex-2, ...; stops are recorded with what the reader had done."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[tuple[str, bool]] = []  # (execution, its reader had ended)
        self.read: set[str] = set()

    def start(self, token: str) -> str:
        self.started.append(f"ex-{len(self.started) + 1}")
        return self.started[-1]

    def stop(self, execution: str) -> None:
        self.stopped.append((execution, execution in self.read))


def _run(place: Place, verdicts: list[Verdict]) -> TaskState:
    plays = iter(verdicts)

    def watch(task: Task, attempt: Attempt) -> Verdict:
        assert attempt.execution is not None
        verdict = next(plays)
        place.read.add(attempt.execution)
        return verdict

    return run_task(
        place.start,
        place.stop,
        watch,
        policy=RetryPolicy(retries=0, platform_retries=1),
        cancel=threading.Event(),
        bucket=TokenBucket(),
        label="the task",
    )


def test_an_answer_is_the_tasks_value_and_comes_without_a_tick() -> None:
    place = Place()
    began = time.monotonic()
    state = _run(place, [Verdict(None, value="nvidia-smi read")])
    assert answer(state, threading.Event()) == "nvidia-smi read"
    assert place.started == ["ex-1"] and place.stopped == []
    assert time.monotonic() - began < 0.5, "the runner waited out a tick after the last verdict"


def test_the_platforms_fault_gets_another_attempt_and_the_users_does_not() -> None:
    place = Place()
    state = _run(place, [Verdict(PLATFORM, "ProbeLost", "lost"), Verdict(None, value="second")])
    assert answer(state, threading.Event()) == "second"
    assert place.started == ["ex-1", "ex-2"]

    place = Place()
    refused = ContainerRefused("the image has no shell")
    state = _run(place, [Verdict(USER, "ContainerRefused", "no shell", error=refused)])
    with pytest.raises(ContainerRefused):
        answer(state, threading.Event())
    assert place.started == ["ex-1"]


def test_a_final_verdict_is_not_retried_whatever_the_policy() -> None:
    place = Place()
    lost = InfraError("deadline spent")
    state = _run(place, [Verdict(PLATFORM, "Deadline", "spent", error=lost, retry=False)])
    with pytest.raises(InfraError):
        answer(state, threading.Event())
    assert place.started == ["ex-1"]


def test_a_start_that_failed_is_raised_and_not_sent_again() -> None:
    place = Place()

    def refuse(token: str) -> str:
        raise InfraError("ARM said no", code="StartRefused")

    state = run_task(
        refuse, place.stop, lambda t, a: Verdict(None), policy=RetryPolicy(platform_retries=3),
        cancel=threading.Event(), bucket=TokenBucket(), label="the task",
    )  # fmt: skip
    with pytest.raises(InfraError) as caught:
        answer(state, threading.Event())
    assert caught.value.code == "StartRefused" and len(state.attempts) == 1


def test_cancel_stops_the_running_attempt_after_its_reader_had_its_settle_time() -> None:
    place = Place()
    cancel = threading.Event()

    def watch(task: Task, attempt: Attempt) -> Verdict:
        cancel.set()  # Ctrl-C while the container runs
        time.sleep(0.3)  # the reader records how the container ended
        assert attempt.execution is not None
        place.read.add(attempt.execution)
        raise WaitTimedOut("cancelled", code="Cancelled")

    state = run_task(
        place.start, place.stop, watch, policy=RetryPolicy(), cancel=cancel, bucket=TokenBucket(),
        label="the container", settle_s=5.0,
    )  # fmt: skip
    assert place.stopped == [("ex-1", True)], "stopped before its reader was done"
    assert state.state == "stopped"
    with pytest.raises(WaitTimedOut) as caught:
        answer(state, cancel)
    assert caught.value.code == "Cancelled"


def test_cancel_without_settle_time_stops_at_once() -> None:
    place = Place()
    cancel = threading.Event()
    release = threading.Event()

    def watch(task: Task, attempt: Attempt) -> Verdict:
        cancel.set()
        release.wait(5)  # a reader stuck in a stream
        return Verdict(None)

    try:
        began = time.monotonic()
        run_task(place.start, place.stop, watch, policy=RetryPolicy(), cancel=cancel,
                 bucket=TokenBucket(), label="the tester")  # fmt: skip
        assert time.monotonic() - began < 2.0
        assert place.stopped == [("ex-1", False)]
    finally:
        release.set()
