"""The task runner's rules on a scripted place: whose fault, which retry, at most P, stop on cancel.

Each shard's attempts follow a script (what the listing says of attempt 1, 2, ...); the runner sees
only the Backend protocol, as it sees ACA's executions in the e2e tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping

from aca_gpu.workflow.engine.pacing import TokenBucket
from aca_gpu.workflow.engine.task_records import Observation, RetryPolicy, Task
from aca_gpu.workflow.engine.task_runner import Deadlines, TaskRunner

OK = [Observation("Running", ("Running",)), Observation("Succeeded", ("Terminated",), 0)]
EXIT3 = [Observation("Running", ("Running",)), Observation("Failed", ("Terminated",), 3)]
STUCK = [Observation("Running", ("AssigningReplica",))]  # never placed: the runner's deadline ends it
BACKOFF = [Observation("Failed", ("AssigningReplica",), None, "BackoffLimitExceeded")]
LOST = [Observation("Running", ("Running",)), Observation("Degraded", (), None, "ReplicaLost")]


class Scripted:
    """Shard k's attempt n plays scripts[k][n-1] (the last one repeats), one step per listing."""

    def __init__(self, scripts: dict[int, list[list[Observation]]]) -> None:
        self.scripts = scripts
        self.live: dict[str, tuple[int, int, int]] = {}  # token -> (shard, attempt, step)
        self.started: list[tuple[int, int]] = []
        self.stopped: list[str] = []
        self.running_max = 0
        self._lock = threading.Lock()

    def start(self, task: Task, attempt: int, token: str) -> str:
        with self._lock:
            self.live[token] = (task.index, attempt, 0)
            self.started.append((task.index, attempt))
        return f"ex-{task.index}-{attempt}"

    def observe(self, live: Collection[str] = ()) -> Mapping[str, tuple[str, Observation]]:
        found = {}
        with self._lock:
            running = 0
            for token, (k, n, step) in list(self.live.items()):
                plays = self.scripts.get(k, [OK])
                script = plays[min(n, len(plays)) - 1]
                seen = script[min(step, len(script) - 1)]
                if f"ex-{k}-{n}" in self.stopped and seen.status not in ("Succeeded", "Failed"):
                    seen = Observation("Stopped", seen.states)
                found[token] = (f"ex-{k}-{n}", seen)
                self.live[token] = (k, n, step + 1)
                running += seen.status == "Running"
            self.running_max = max(self.running_max, running)
        return found

    def stop(self, execution: str) -> None:
        self.stopped.append(execution)


def run(scripts: dict[int, list[list[Observation]]], n: int, *, limit: int = 3, **policy: object) -> tuple:
    backend = Scripted(scripts)
    runner = TaskRunner(
        backend,
        [Task(k, {"ACAGPU_SHARD_INDEX": str(k)}) for k in range(n)],
        limit=limit,
        policy=RetryPolicy(backoff_s=0.0, **policy),  # type: ignore[arg-type]
        deadlines=Deadlines(start_s=0.05, tick_s=0.01),
        bucket=TokenBucket(),
        cancel=threading.Event(),
    )
    states = runner.run()
    return states, backend


def test_the_containers_failure_is_retried_only_with_retries() -> None:
    states, _ = run({2: [EXIT3]}, 4)
    assert [s.state for s in states] == ["succeeded", "succeeded", "failed", "succeeded"]
    assert (states[2].current.fault, states[2].current.exit_code, len(states[2].attempts)) == ("user", 3, 1)
    states, _ = run({2: [EXIT3, EXIT3, OK]}, 4, retries=2)
    assert (states[2].state, states[2].user_retries, len(states[2].attempts)) == ("succeeded", 2, 3)
    states, _ = run({2: [EXIT3, OK]}, 4, retries=2, retry_on_exit=frozenset({137}))
    assert (states[2].state, len(states[2].attempts)) == ("failed", 1)  # 3 is not a code to retry


def test_the_platforms_failures_are_retried_without_spending_retries() -> None:
    states, backend = run({0: [STUCK, OK], 1: [BACKOFF, OK], 2: [LOST, OK]}, 3)
    assert [s.state for s in states] == ["succeeded"] * 3
    assert [(s.platform_retries, s.user_retries) for s in states] == [(1, 0)] * 3
    reasons = [s.attempts[0].reason.split(":")[0] for s in states]
    assert reasons == ["NeverPlaced", "BackoffLimitExceeded", "ReplicaLost"]
    assert all(s.attempts[0].fault == "platform" for s in states)
    assert "ex-0-1" in backend.stopped  # the unplaced attempt is stopped before its retry starts
    states, _ = run({0: [STUCK]}, 1, platform_retries=2)
    assert (states[0].state, len(states[0].attempts)) == ("failed", 3)  # bounded


def test_at_most_p_run_and_every_index_succeeds_once() -> None:
    slow = [Observation("Running", ("Running",))] * 5 + [Observation("Succeeded", ("Terminated",), 0)]
    states, backend = run({k: [slow] for k in range(12)}, 12, limit=4)
    assert backend.running_max <= 4
    assert sorted(k for k, _ in backend.started) == list(range(12))
    assert all(sum(a.status == "succeeded" for a in s.attempts) == 1 for s in states)


def test_cancel_stops_every_running_attempt() -> None:
    forever = [[Observation("Running", ("Running",))]]
    backend = Scripted({k: forever for k in range(6)})
    cancel = threading.Event()
    runner = TaskRunner(backend, [Task(k, {}) for k in range(6)], limit=3, policy=RetryPolicy(),
                        deadlines=Deadlines(start_s=60, tick_s=0.01), bucket=TokenBucket(),
                        cancel=cancel)  # fmt: skip
    threading.Timer(0.2, cancel.set).start()
    began = time.monotonic()
    states = runner.run()
    assert time.monotonic() - began < 5
    assert sorted(backend.stopped) == ["ex-0-1", "ex-1-1", "ex-2-1"]
    assert [s.state for s in states] == ["stopped"] * 3 + ["cancelled"] * 3  # stopped by Ctrl-C: not failures


def test_the_write_bucket_never_gives_more_than_its_burst_and_refill() -> None:
    now = [0.0]
    bucket = TokenBucket(capacity=200, refill=10, clock=lambda: now[0])
    assert sum(bucket.take() for _ in range(500)) == 200
    now[0] = 3.0
    assert sum(bucket.take() for _ in range(500)) == 30


def test_a_job_deleted_under_the_runner_ends_it_at_once() -> None:
    """`acagpu down --run-id` from another shell (or reap, the guard) deleted the run's job: every
    listing is a 404, which the runner tried again each tick until the shards' deadlines (minutes).
    It ends at once: the live shards failed for good (JobDeleted), the rest never started."""
    from aca_gpu.errors import NotFound

    class Deleted(Scripted):
        def observe(self, live: Collection[str] = ()) -> Mapping[str, tuple[str, Observation]]:
            if self.started:  # deleted right after the first round started
                raise NotFound(
                    "list executions of run-x: The Resource 'Microsoft.App/jobs/run-x' was not found"
                )
            return super().observe(live)

    backend = Deleted({k: [[Observation("Running", ("Running",))]] for k in range(4)})
    runner = TaskRunner(
        backend,
        [Task(k, {"ACAGPU_SHARD_INDEX": str(k)}) for k in range(4)],
        limit=2,
        policy=RetryPolicy(backoff_s=0.0, platform_retries=3),
        deadlines=Deadlines(start_s=600.0, tick_s=0.01),  # its deadlines would hold it for minutes
        bucket=TokenBucket(),
        cancel=threading.Event(),
    )
    began = time.monotonic()
    states = runner.run()
    assert time.monotonic() - began < 5.0
    assert [s.state for s in states] == ["failed", "failed", "cancelled", "cancelled"]
    assert all(
        (s.current.reason or "").startswith("JobDeleted: the run's job was deleted") for s in states[:2]
    )
    assert len(backend.started) == 2 and runner.removed is not None  # no retry: it could only fail
