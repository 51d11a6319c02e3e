"""The rules under `--wait-for-capacity` and `--max-cost`, without a cloud.

- typed reasons: only no capacity and WorkLoad Profile Full are waited on;
- the gap doubles from the first to 10 min, and a place refused for quota is not tried again;
- the unavailability cache: concurrent writers (processes) lose no entry, entries past 30 min are
  not read, known places go last, a place that worked is forgotten;
- the cost cap in the task runner: no start past the cap less one start's cost, the running
  attempts stopped when the next look would pass it, the rest never started.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from pathlib import Path

from aca_gpu.errors import AuthError, InfraError, QuotaError, WaitTimedOut
from aca_gpu.workflow.engine import waiting
from aca_gpu.workflow.engine.pacing import TokenBucket
from aca_gpu.workflow.engine.spend_cap import SpendCap
from aca_gpu.workflow.engine.task_records import RetryPolicy, Task
from aca_gpu.workflow.engine.task_runner import Deadlines, TaskRunner
from aca_gpu.workflow.preflight import unavailable
from tests.workflow.test_fanout_tasks import OK, Observation, Scripted


def test_reasons_are_typed_and_only_those_waiting_cures_are_waited_on() -> None:
    cases = {
        QuotaError(
            "no GPU capacity: x was never placed (WorkLoad Profile Full)", code="CapacityUnavailable"
        ): (waiting.PROFILE_FULL),
        QuotaError("no GPU capacity: x never placed (0/4 nodes are available)", code="CapacityUnavailable"): (
            waiting.NO_CAPACITY
        ),
        WaitTimedOut(
            "container: never started: no replica of it ran before --max-minutes 1"
        ): waiting.NO_CAPACITY,
        QuotaError("eastus: not enough GPU quota", code="InsufficientGpuQuota"): waiting.QUOTA,
        QuotaError("Maximum Allowed Cores exceeded", code="MaxNumberOfGpuCoresExceeded"): waiting.QUOTA,
        AuthError("not registered", code="MissingSubscriptionRegistration"): waiting.NOT_REGISTERED,
        InfraError("offer", code="ProfileNotOffered"): waiting.NOT_OFFERED,
        InfraError("connection reset"): waiting.OTHER,
    }
    for error, reason in cases.items():
        assert waiting.reason_of(error) == reason, error.message
    assert {waiting.NO_CAPACITY, waiting.PROFILE_FULL} == waiting.WAITABLE


def test_the_gap_doubles_to_ten_minutes_and_quota_is_not_tried_again(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))
    wait = waiting.CapacityWait(7200, first_gap=30)
    gaps = []
    for _ in range(7):
        gaps.append(wait.gap())
        wait.sweeps += 1
    assert gaps == [30, 60, 120, 240, 480, 600, 600]
    wait.saw("eastus", "t4", "T4", QuotaError("not enough GPU quota", code="InsufficientGpuQuota"))
    wait.saw(
        "westus3", "t4", "T4", QuotaError("never placed (WorkLoad Profile Full)", code="CapacityUnavailable")
    )
    assert not wait.worth_trying(("eastus", "t4")) and wait.worth_trying(("westus3", "t4"))
    assert wait.worth_trying(("canadacentral", "t4"))  # not seen yet
    line = wait.line("t4", time.time() + 30)
    assert line.startswith("waiting for a T4: no capacity in eastus (quota), westus3 (WorkLoad Profile Full)")
    assert "next try" in line and "gives up" in line
    assert wait.error("t4").code == waiting.EXPIRED
    # only quota left: nothing to wait for, and the hint says how to ask for quota
    only_quota = waiting.CapacityWait(60)
    only_quota.saw("eastus", "t4", "T4", QuotaError("not enough GPU quota", code="InsufficientGpuQuota"))
    error = only_quota.error("t4")
    assert error.code == waiting.NOTHING_TO_WAIT_FOR and "quota" in (error.hint or "").lower()
    # what waiting can cure was remembered for the next runs, quota was not
    assert [(s.location, s.reason) for s in unavailable.known(tmp_path / unavailable.FILE)] == [
        ("westus3", waiting.PROFILE_FULL)
    ]


def _remember_many(path: str, worker: int) -> None:
    for i in range(15):
        unavailable.remember(f"r{worker}x{i}", "T4", "no-capacity", "full", Path(path))


def test_the_cache_keeps_every_concurrent_writers_entry_and_orders_and_forgets(tmp_path: Path) -> None:
    path = tmp_path / unavailable.FILE
    workers = [multiprocessing.Process(target=_remember_many, args=(str(path), w)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert len(unavailable.known(path)) == 45  # no writer lost another's entry
    assert not list(tmp_path.glob(".unavailable-*"))  # no temporary file left
    unavailable.remember("eastus", "T4", "profile-full", "WorkLoad Profile Full", path)
    places = [("eastus", "t4"), ("westus3", "t4")]
    assert unavailable.order(places, lambda p: (p[0], "T4"), path) == [("westus3", "t4"), ("eastus", "t4")]
    unavailable.clear("eastus", "T4", path)
    assert unavailable.lookup("eastus", "T4", path) is None
    # past 30 min an entry is not read (and the next write drops it)
    doc = json.loads(path.read_text())
    for entry in doc.values():
        entry["seen_at"] -= unavailable.TTL_S + 1
    path.write_text(json.dumps(doc))
    assert unavailable.known(path) == []


def _runner(backend: Scripted, n: int, cap: SpendCap, seconds: list[float]) -> TaskRunner:
    runner = TaskRunner(
        backend,
        [Task(k, {}) for k in range(n)],
        limit=2,
        policy=RetryPolicy(backoff_s=0.0),
        deadlines=Deadlines(start_s=5.0, tick_s=0.01),
        bucket=TokenBucket(),
        cancel=threading.Event(),
        cap=cap,
    )
    # the run's spend: one replica-second a look for every attempt running (a scripted clock)
    cap.seconds = lambda: seconds[0]

    def looked() -> None:
        seconds[0] += runner.in_flight()

    runner._on_look = looked
    return runner


def test_the_cost_cap_stops_the_running_and_starts_nothing_more() -> None:
    long = [[Observation("Running", ("Running",))] * 50 + [OK[1]]]
    backend = Scripted(dict.fromkeys(range(6), long))
    cap = SpendCap(cap_usd=7.0, usd_per_s=1.0, tick_s=1.0)
    states = _runner(backend, 6, cap, [0.0]).run()
    assert cap.reached
    assert cap.spent_usd <= 7.0  # stopped before the next look could pass the cap
    assert len(backend.started) == 2  # the limit's two; none after the cap was near
    assert sorted(backend.stopped) == ["ex-0-1", "ex-1-1"]  # stopped, billing first
    assert [s.state for s in states] == [
        "stopped",
        "stopped",
        "cancelled",
        "cancelled",
        "cancelled",
        "cancelled",
    ]
    assert (
        states[0].current is not None and states[0].current.reason == "CostCapReached: stopped at --max-cost"
    )


def test_no_start_once_the_cap_less_one_starts_cost_is_spent() -> None:
    backend = Scripted({0: [OK]})
    cap = SpendCap(cap_usd=3.0, usd_per_s=1.0, tick_s=1.0)
    states = _runner(backend, 4, cap, [2.5]).run()  # 2.5 spent: 2.5 + one start's 1.0 > 3
    assert backend.started == [] and cap.reached
    assert [s.state for s in states] == ["cancelled"] * 4


def test_a_ctrl_c_as_the_waiting_line_is_said_ends_the_wait_and_a_probe_reads_placement_right() -> None:
    """The SIGINT a user (or a test) sends on seeing the waiting line can land while it is written:
    it ends the wait like one during the gap, never escaping as a KeyboardInterrupt that would leave
    the places the wait kept. A probe is placed by a state past AssigningReplica while it runs, and
    once ended only by success or a container's own exit code (an unplaced one ended by its
    timeout shows "Terminated" with no code)."""
    from aca_gpu.models import ExecutionInfo
    from aca_gpu.workflow.engine.parking import _placed

    class Interrupting:
        def warn(self, text: str) -> None:
            raise KeyboardInterrupt

        def note(self, text: str) -> None:
            pass

    wait, cancel = waiting.CapacityWait(60, first_gap=5), threading.Event()
    assert wait.pause("t4", Interrupting(), cancel) is False  # type: ignore[arg-type]
    assert cancel.is_set() and wait.sweeps == 1

    def info(status: str, states: tuple[str, ...] = (), codes: tuple[int, ...] = ()) -> ExecutionInfo:
        return ExecutionInfo(name="x", status=status, states=states, exit_codes=codes)

    assert not _placed(info("Running", ("AssigningReplica",)))
    assert _placed(info("Running", ("PullingImage",))) and _placed(info("Running", ("Running",)))
    assert not _placed(info("Failed", ("Terminated",)))  # DeadlineExceeded, never placed
    assert _placed(info("Succeeded", ("Terminated",), (0,))) and _placed(info("Failed", (), (1,)))
