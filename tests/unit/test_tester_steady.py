"""The tester's steady-state rule on fake chunks and samples (no GPU): when the warm-up may end,
how each dtype's window and warm-up cap are planned, and the telemetry every window must hold.

The rule (gpu_tester.py `Steady`): the last three one-second periods must each agree with the one
before on rate (1 %), median SM clock (2 %) and median power (5 %); the window is 4 s for fp16/bf16,
2 s for fp32/tf32, never under 1 s; every period and window holds at least 5 telemetry samples.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pytest

from tests.unit.test_tester_script import _tester

T = _tester()
PERIOD = 1.0


def how(period: float = PERIOD) -> Any:
    return T.Steady(window_s=4.0, period_s=period, warm_max_s=6.0)


def chunks(rates: list[float], per_period: int = 4, start: float = 100.0) -> list[tuple[float, float, float]]:
    """(t_end, ms, flops) as steady_rate records them: `per_period` chunks in each period at one
    rate (flops per ms), the last chunk ending the last period. _settled measures its periods back
    from that last chunk, so with three rates period k is [start + k, start + k + 1) and every chunk
    lies well inside its own."""
    out = []
    last = len(rates) - 1
    for k, rate in enumerate(rates):
        for c in range(per_period):
            offset = (c + 1) / per_period if k == last else (c + 0.4) / per_period
            out.append((start + k * PERIOD + offset, 50.0, 50.0 * rate))
    return out


def sampler(points: list[tuple[float, int, float]]) -> Any:
    """A Sampler holding (time, SM MHz, W) readings, as its NVML thread would have taken them."""
    s = T.Sampler(None, None, 0.02)
    s.times = [t for t, _, _ in points]
    s.samples = [(sm, 2619, w, 60, 100, 0) for _, sm, w in points]
    return s


def readings(values: list[tuple[int, float]], per_period: int = 10, start: float = 100.0) -> Any:
    """One (SM MHz, W) pair per period, sampled `per_period` times in it."""
    points = []
    for k, (sm, w) in enumerate(values):
        for i in range(per_period):
            points.append((start + k * PERIOD + (i + 0.5) / per_period, sm, w))
    return sampler(points)


def test_three_agreeing_periods_are_settled() -> None:
    steady = readings([(1500, 690.0)] * 3)
    assert T._settled(chunks([100.0, 100.4, 100.2]), steady, how())
    assert T._settled(chunks([100.0, 100.0, 100.0]), None, how())  # no telemetry: the rate alone


@pytest.mark.parametrize(
    ("rates", "clocks_watts", "why"),
    [
        ([100.0, 100.0, 101.5], [(1500, 690.0)] * 3, "rate moved 1.5 % in the last period"),
        ([98.0, 100.0, 100.0], [(1500, 690.0)] * 3, "rate moved 2 % two periods ago"),
        ([100.0] * 3, [(1500, 690.0), (1500, 690.0), (1545, 690.0)], "SM clock moved 3 %"),
        ([100.0] * 3, [(1500, 640.0), (1500, 690.0), (1500, 690.0)], "power moved 7.8 %"),
        # the last two periods agree (0.9 %), the one before did not: a rule of two would have ended here
        ([100.0, 101.5, 100.6], [(1500, 690.0)] * 3, "a swing met halfway"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_period_that_moved_is_not_settled(
    rates: list[float], clocks_watts: list[tuple[int, float]], why: str
) -> None:
    assert not T._settled(chunks(rates), readings(clocks_watts), how()), why


def test_the_tolerances_are_per_period_and_relative() -> None:
    # just inside each tolerance at once: rate 0.9 %, clock 1.9 %, power 4.9 % per period
    inside = readings([(1500, 600.0), (1528, 629.4), (1556, 660.0)])
    assert T._settled(chunks([100.0, 100.9, 101.8]), inside, how())
    # one just outside: power 5.1 % between the last two periods
    outside = readings([(1500, 600.0), (1500, 600.0), (1500, 630.6)])
    assert not T._settled(chunks([100.0, 100.0, 100.0]), outside, how())


def test_a_period_without_chunks_is_not_settled() -> None:
    full = chunks([100.0] * 3)
    gap = [c for c in full if not (101.0 <= c[0] < 102.0)]  # the middle period held no chunk
    assert not T._settled(gap, readings([(1500, 690.0)] * 3), how())
    assert not T._settled(chunks([100.0] * 2), None, how())  # two periods only


def test_a_period_without_telemetry_is_judged_on_what_was_read() -> None:
    """A clock or power missing in one period (NVML declined) cannot move; the rate still judges."""
    partial = readings([(1500, 690.0)] * 3)
    partial.samples = [
        (None, 2619, None, 60, 100, 0) if t < 101.0 else s
        for t, s in zip(partial.times, partial.samples, strict=True)
    ]
    assert T._settled(chunks([100.0] * 3), partial, how())
    assert not T._settled(chunks([100.0, 100.0, 103.0]), partial, how())


class FakeClock:
    def __init__(self, left: float) -> None:
        self._left = left

    def left(self) -> float:
        return self._left


def plan(
    name: str, *, share: float = 30.0, left: float = 40.0, todo: str = "fp32,tf32,fp16,bf16", **kw: Any
) -> Any:
    args = argparse.Namespace(window=kw.get("window", 0.0), quick=kw.get("quick", False))
    return T.steady_plan(args, time.monotonic() + share, FakeClock(left), todo.split(","), name)


def test_default_plan_headline_dtypes_get_the_longest_windows() -> None:
    fp16 = plan("fp16", todo="fp16,bf16")
    assert (fp16.window_s, fp16.period_s) == (4.0, 1.0)
    assert fp16.warm_max_s == pytest.approx(6.0)
    fp32 = plan("fp32")
    assert (fp32.window_s, fp32.period_s) == (2.0, 1.0)
    assert fp32.warm_max_s == pytest.approx(4.0)  # fp32/tf32 must not eat the headline's time


def test_quick_plan_and_window_override() -> None:
    quick = plan("bf16", todo="bf16", quick=True)
    assert (quick.window_s, quick.period_s, quick.warm_max_s) == (1.0, 0.5, 2.0)
    asked = plan("fp16", todo="fp16", window=3.0)
    assert asked.window_s == 3.0


def test_a_short_share_shrinks_the_window_but_never_under_a_second() -> None:
    # 6 s left for fp16 and bf16: each gets 3 s, at most half of it the window
    tight = plan("fp16", share=6.0, todo="fp16,bf16")
    assert 1.0 <= tight.window_s <= 1.5
    # nothing left: the window stays 1 s and the warm-up can still see three periods
    starved = plan("fp32", share=0.5, left=1.0)
    assert starved.window_s == 1.0
    assert starved.warm_max_s == pytest.approx(3 * 1.0 + 0.2)
    # the run's budget (clock) bounds too, not only the device's share
    budget = plan("bf16", share=60.0, left=4.0, todo="bf16")
    assert budget.window_s == 1.0


def test_every_period_and_window_gets_at_least_five_samples() -> None:
    """--telemetry-ms up to 5000 is accepted; the steady rate shortens it for its own sampling."""
    assert T.MIN_WINDOW_SAMPLES == 5
    for steady in (plan("fp16"), plan("fp32"), plan("bf16", quick=True), plan("fp32", share=0.5, left=1.0)):
        for requested in (0.005, 0.02, 0.5, 5.0):
            interval = steady.sample_interval(requested)
            assert interval <= requested
            assert min(steady.period_s, steady.window_s) / interval >= 2 * T.MIN_WINDOW_SAMPLES - 1e-9
    assert plan("fp16").sample_interval(0.02) == 0.02  # the default is left alone


class FakeEvent:
    """A CUDA event on the host clock: elapsed_time in ms between two records."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 1e3


class FakeTorch:
    class cuda:  # torch.cuda, as steady_rate calls it
        Event = FakeEvent


class SteadyNvml:
    """An NVML that always answers the same clocks and power (a card at steady state)."""

    def sample(self, handle: Any) -> tuple[Any, ...]:
        return (1500, 2619, 690.0, 60, 100, 0x4)


def test_a_steady_rate_samples_its_window_at_least_five_times_even_when_asked_for_one_second() -> None:
    """steady_rate end to end on a fake device: 1 s sampling asked, a 0.3 s window still has >= 5."""
    steady = T.Steady(window_s=0.3, period_s=0.1, warm_max_s=1.0)
    steady.chunk_ms = 5.0
    steady.rate_tol = 0.5  # host sleeps jitter; this test is about the samples, not the settling

    def step(i: int) -> None:
        time.sleep(0.0005)

    row = T.steady_rate(FakeTorch, step, 1e9, steady, T.Sampler(SteadyNvml(), None, 1.0))
    assert row["window_s"] >= 0.3
    assert row["telemetry"]["samples"] >= T.MIN_WINDOW_SAMPLES
    assert row["telemetry"]["sm_clock_mhz"] == 1500 and row["telemetry"]["reasons"] == {"sw-power-cap": 1.0}
