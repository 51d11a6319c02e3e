"""How an attempt's GPU-seconds are judged (`engine/lifetime.py`, issue 36 item E): the figures the
fault runs gave (49.9 s and 2.5 s for 1 s containers, 0.001 and 0.07 s for 1-2 s ones), fed to the
rule, come out bounded by the platform or said to be estimates; and what the run's closing lines
say of them."""

from __future__ import annotations

import time

from aca_gpu.workflow.engine import lifetime
from aca_gpu.workflow.engine.lifetime import (
    ESTIMATED,
    MEASURED,
    PLATFORM,
    Lifetime,
    arm_window,
    judged,
    within_events,
)
from aca_gpu.workflow.engine.task_records import Attempt
from aca_gpu.workflow.fanout.outcome import render_fanout
from aca_gpu.workflow.tester.render import _cost_line
from aca_gpu.workflow.workload.outcome import render_run

START, END = "2026-11-29T00:46:16+00:00", "2026-11-29T00:46:19+00:00"  # ARM: 3 s, pull included


def test_a_measure_above_the_executions_own_start_and_end_is_bounded_and_said() -> None:
    life = judged(49.9, lost=["1 read(s) of its status failed"], window=arm_window(START, END))
    assert life.seconds == 4.0 and life.quality == ESTIMATED  # 3 s + ARM's whole second
    assert "status failed" in life.why and "start-to-end by ARM" in life.why


def test_lost_evidence_takes_the_platforms_events_or_says_it_is_an_estimate() -> None:
    lost = ["its container's start was not seen"]
    assert judged(0.001, lost=lost, events_s=2.0) == Lifetime(
        2.0, PLATFORM, judged(0.001, lost=lost, events_s=2.0).why
    )
    unread = judged(2.5, lost=["its end was seen ended after 2 listing(s) failed"])
    assert unread.seconds == 2.5 and unread.quality == ESTIMATED and "listing" in unread.why


def test_a_measure_the_events_rule_out_takes_the_nearest_figure_they_allow() -> None:
    """A stream the service closed early looked like the container's exit (0.07 s for 1 s)."""
    early = judged(0.07, events_s=2.0)
    assert early.seconds == 1.0 and early.quality == ESTIMATED and "ContainerStarted" in early.why
    fine = judged(1.4, events_s=2.0, window=arm_window(START, END))  # whole seconds: within one
    assert fine == Lifetime(1.4)


def test_the_runs_quality_is_its_worst_part_and_every_human_line_says_it() -> None:
    said = lifetime.summary(
        [("probe", Lifetime(1.0)), ("run-x", judged(0.001, lost=["start"], events_s=2.0))]
    )
    assert said["gpu_seconds_quality"] == PLATFORM and not said["estimated"]
    assert said["gpu_seconds_notes"] == [
        "run-x: start: the platform's ContainerStarted to its end instead of 0.001 s"
    ]
    worst = lifetime.summary([("a", judged(9.0, window=2.0)), ("b", judged(1.0, lost=["x"], events_s=1.0))])
    assert (
        worst["gpu_seconds_quality"] == ESTIMATED
        and worst["estimated"]
        and len(worst["gpu_seconds_notes"]) == 2
    )
    assert lifetime.summary([("a", Lifetime(1.0))]) == {
        "gpu_seconds_quality": MEASURED, "estimated": False, "gpu_seconds_notes": []
    }  # fmt: skip
    cost = {"gpu_seconds": 4.0, "usd_estimate": 0.001, "basis": "b", **worst}
    assert "estimated: a: 9.000 s is more than" in _cost_line(cost)  # up, test, validate
    doc = {
        "run_id": "r",
        "runtime": "aca",
        "location": "eastus",
        "container": {},
        "cost": cost,
        "teardown": {},
    }
    assert "estimated: a: " in render_run(doc) and "(+1 more in -o json)" in render_run(doc)
    assert lifetime.quality_text({**cost, **lifetime.summary([("a", Lifetime(1.0))])}) is None
    summary = {"shards": 1, "succeeded": 1, "attempts": 1, "platform_retries": 0, "user_retries": 0,
               "failed_indexes": []}  # fmt: skip
    fan = render_fanout({"run_id": "f", "summary": summary, "shards": [], "cost": cost, "teardown": {}})
    assert "estimated: a: " in fan, fan  # a fan-out's cost line


# ---- a shard's figure from its replica's events (a fan-out's, as a run's) --------------------------

S = 1_800_000_000.0  # an event's whole second (epoch)


def test_each_moment_is_its_events_second_narrowed_by_what_the_looks_allow() -> None:
    assert within_events((S, S + 2)) == 2.0  # no span: the middle of each second
    # the looks saw it start in the second's first half and end in its second half
    assert within_events((S, S + 2), start=(S - 3, S + 0.5), end=(S + 2.5, S + 9)) == 2.5
    # a stream's exact start inside the second stands as it is
    assert abs(within_events((S, S + 1), start=(S + 0.8, S + 0.8)) - 0.7) < 1e-6
    # a span that misses its second (the clocks disagree): the events' own difference
    assert within_events((S, S + 2), start=(S + 1.2, S + 1.2), end=(S + 2.5, S + 9)) == 2.0


def _attempt(lost: list[str]) -> Attempt:
    """A shard attempt whose looks bounded its start and end (monotonic, now-relative) and whose
    end was seen only after listings failed: `lost`."""
    now = time.monotonic()
    return Attempt(
        1, "t", "job-e1", started=now - 9, running=now - 6, ended=now - 1, run_end=now - 1.5,
        start_span=(now - 7, now - 5), end_span=(now - 4, now - 1), lost=lost,
    )  # fmt: skip


def test_a_shard_that_lost_its_evidence_takes_its_events_or_says_why_it_could_not() -> None:
    wall = time.time() - time.monotonic()
    lost = _attempt(["its end was seen ended after 3 listing(s) failed"])
    assert lost.lifetime.quality == ESTIMATED and lost.lifetime.seconds == lost.measured_seconds
    lost.events_missing = "the platform's events, which would stand in, could not be read"
    assert "could not be read" in lost.lifetime.why and lost.lifetime.quality == ESTIMATED
    second = float(int(time.monotonic() + wall - 6))
    lost.events = (second, second + 3)  # ContainerStarted, ContainerTerminated
    life = lost.lifetime
    assert life.quality == PLATFORM and "ContainerStarted" in life.why, life
    assert 2.0 <= life.seconds <= 4.0 and life.seconds != lost.measured_seconds
    # a measured shard keeps its own figure: the events only hold it within their second
    kept = _attempt([])  # 4.5 s measured
    kept.events = (second, second + 4)
    assert kept.lifetime == Lifetime(kept.measured_seconds)
    kept.events = (second, second + 2)  # more than a second from them: the nearest they allow, said
    assert kept.lifetime.seconds == 3.0 and kept.lifetime.quality == ESTIMATED
