"""The tester's steady-state rule on fake chunks and samples (no GPU): when the warm-up may end,
how each dtype's window and warm-up cap are planned, and the telemetry every window must hold.

The rule (gpu_tester.py `Steady`): the last three one-second periods must each agree with the one
before on rate (1 %), median SM clock (2 %) and median power (5 %); the window is 4 s for fp16/bf16,
2 s for fp32/tf32, never under 1 s; every period and window holds at least 5 telemetry samples.
How each rate's plan is drawn from the budget is tests/unit/test_tester_plan.py's.
"""

from __future__ import annotations

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


def test_every_period_and_window_gets_at_least_five_samples() -> None:
    """--telemetry-ms up to 5000 is accepted; the steady rate shortens it for its own sampling."""
    assert T.MIN_WINDOW_SAMPLES == 5
    steadies = [
        T.Steady(2.0, 1.0, 6.0),
        T.Steady(1.0, 1.0, 3.2, agree=2, follow_on=True),
        T.Steady(1.0, 0.5, 2.0),
        T.Steady(1.0, 1.0, 3.2),
    ]
    for steady in steadies:
        for requested in (0.005, 0.02, 0.5, 5.0):
            interval = steady.sample_interval(requested)
            assert interval <= requested
            assert min(steady.period_s, steady.window_s) / interval >= 2 * T.MIN_WINDOW_SAMPLES - 1e-9
    assert steadies[0].sample_interval(0.02) == 0.02  # the default is left alone


def test_two_agreeing_periods_settle_a_later_rate() -> None:
    """A rate measured on a card at full load already asks two agreeing periods, not three."""
    later = T.Steady(1.0, PERIOD, 3.2, agree=2, follow_on=True)
    steady = readings([(1500, 690.0)] * 2)
    assert T._settled(chunks([100.0, 100.6]), steady, later)
    assert not T._settled(chunks([100.0, 101.5]), steady, later)
    assert not T._settled(chunks([100.0, 100.6]), steady, how())  # a cold card still asks three


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


def test_a_later_rate_takes_its_last_agreeing_period_as_its_window() -> None:
    """follow_on: no window of its own after the warm-up; the last period is the window."""
    steady = T.Steady(0.3, 0.3, 1.0, agree=2, follow_on=True)
    steady.chunk_ms = 5.0
    steady.rate_tol = 0.5  # host sleeps jitter; this test is about where the window is
    row = T.steady_rate(
        FakeTorch, lambda i: time.sleep(0.0005), 1e9, steady, T.Sampler(SteadyNvml(), None, 1.0)
    )
    assert row["settled"] is True
    # the window lies inside the two periods (about 0.3 s each), not after them
    assert 0.2 <= row["window_s"] <= 0.35
    assert row["warmup_s"] + row["window_s"] == pytest.approx(0.6, abs=0.15)
    assert row["telemetry"]["samples"] >= T.MIN_WINDOW_SAMPLES


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
