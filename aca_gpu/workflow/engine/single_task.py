"""A single task: one attempt at a time, watched by its own reader (the probe, the tester, a run).

It goes through `TaskRunner` like a shard (its start within the write bucket, a token per attempt,
the retry judgement, the stop at cancel) with limit 1 and a backend that lists nothing: the task's
`Watch` follows its one execution and says how it ended. `answer` turns that end into the task's
value or the error its caller raises.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from aca_gpu.errors import WaitTimedOut
from aca_gpu.models import Cloud
from aca_gpu.workflow.engine.executions import ExecutionRun, stopper
from aca_gpu.workflow.engine.pacing import TokenBucket, bucket_of
from aca_gpu.workflow.engine.spend_cap import SpendCap
from aca_gpu.workflow.engine.task_records import (
    Attempt,
    Observation,
    RetryPolicy,
    Task,
    TaskState,
    Verdict,
    Watch,
)
from aca_gpu.workflow.engine.task_runner import Deadlines, TaskRunner


class OwnStarts:
    """The backend of a watched task: its own start (a template of its job, with the token) and
    stop; nothing is listed, since its reader follows the one execution it has."""

    def __init__(self, start: Callable[[str], str], stop: Callable[[str], None]) -> None:
        self._start, self._stop = start, stop

    def start(self, task: Task, attempt: int, token: str) -> str:
        return self._start(token)

    def observe(self, live: Collection[str] = ()) -> Mapping[str, tuple[str, Observation]]:
        return {}

    def stop(self, execution: str) -> None:
        self._stop(execution)


def run_task(
    start: Callable[[str], str],
    stop: Callable[[str], None],
    watch: Watch,
    *,
    policy: RetryPolicy,
    cancel: threading.Event,
    bucket: TokenBucket,
    label: str,
    settle_s: float = 0.0,
    cap: SpendCap | None = None,
) -> TaskState:
    """One task at a time (limit 1): the probe, the tester, a single run. `start(token)` starts an
    attempt and returns its execution; `watch` reads it to its verdict."""
    runner = TaskRunner(
        OwnStarts(start, stop),
        [Task(0, {}, label)],
        limit=1,
        policy=policy,
        deadlines=Deadlines(start_s=math.inf),  # the reader's own: it knows what it waits for
        bucket=bucket,
        cancel=cancel,
        starters=1,
        watch=watch,
        settle_s=settle_s,
        cap=cap,
    )
    return runner.run()[0]


R = TypeVar("R", bound=ExecutionRun)


def run_execution(
    cloud: Cloud,
    resource_group: str,
    job: str,
    start: Callable[[str], R],
    read: Callable[[R], Verdict],
    *,
    policy: RetryPolicy,
    cancel: threading.Event,
    label: str,
    settle_s: float = 0.0,
    cap: SpendCap | None = None,
) -> TaskState:
    """A single task whose attempts are executions of `job`: `start(token)` starts one and returns
    the run its reader follows, `read(run)` follows it to its verdict. Starts take the
    subscription's write bucket; a stop ends the run's measured life (`executions.stopper`)."""
    started: dict[str, R] = {}

    def begin(token: str) -> str:
        run = start(token)
        started[run.execution] = run
        return run.execution

    def watch(task: Task, attempt: Attempt) -> Verdict:
        assert attempt.execution is not None
        run = started[attempt.execution]
        attempt.extras += list(run.extras)  # its start ran twice: the other was stopped
        return read(run)

    return run_task(
        begin,
        stopper(cloud, resource_group, job, started),
        watch,
        policy=policy,
        cancel=cancel,
        bucket=bucket_of(cloud),
        label=label,
        settle_s=settle_s,
        cap=cap,
    )


def answer(state: TaskState, cancel: threading.Event) -> Any:
    """A single task's answer (its last verdict's value), or what ended it raised: the error of
    its last attempt, or Cancelled when the run's cancel stopped it."""
    verdict = state.verdict
    if state.state == "succeeded" and verdict is not None:
        return verdict.value
    if cancel.is_set() or verdict is None or state.state in ("stopped", "cancelled"):
        raise WaitTimedOut(f"{state.task.label}: cancelled", code="Cancelled")
    if verdict.error is not None:
        raise verdict.error
    return verdict.value
