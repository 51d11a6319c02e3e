"""How the tester spends its budget (no GPU): the headline rate first, later rates shortened or
skipped and each skip said, a warning where the budget cannot hold every rate at its settled length.

`measure_device` runs here on a fake clock: each rate costs its plan's warm-up cap and window (the
worst case) in fake seconds, so the order and the budget's choices are what is tested, not timing.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.test_tester_script import _tester

T = _tester()


def args(*argv: str) -> argparse.Namespace:
    return T.parse_args(list(argv))


def test_the_headline_rate_comes_first() -> None:
    assert T.rate_order(["fp32", "tf32", "fp16", "bf16"], True) == ["bf16", "fp16", "tf32", "fp32"]
    assert T.rate_order(["fp32", "tf32", "fp16", "bf16"], False) == ["fp16", "tf32", "fp32"]  # a T4
    assert T.rate_order(["fp32", "tf32"], True) == ["tf32", "fp32"]


def test_default_plan_the_cold_card_settles_once_then_whole_seconds() -> None:
    first = T.natural_plan(args(), "bf16", True)
    assert (first.window_s, first.period_s, first.warm_max_s, first.agree) == (2.0, 1.0, 6.0, 3)
    assert not first.follow_on
    later = T.natural_plan(args(), "fp16", False)
    assert (later.period_s, later.agree, later.follow_on) == (1.0, 2, True)
    assert later.warm_max_s == pytest.approx(3.2)  # window included: the last agreeing period


def test_quick_plan_and_window_override() -> None:
    quick = T.natural_plan(args("--quick"), "bf16", True)
    assert (quick.window_s, quick.period_s, quick.warm_max_s) == (1.0, 1.0, 3.5)
    assert T.natural_plan(args("--quick"), "tf32", False).warm_max_s == pytest.approx(2.2)
    asked = T.natural_plan(args("--window", "3"), "fp16", False)
    assert (asked.window_s, asked.follow_on, asked.agree) == (3.0, False, 2)


def test_a_short_share_shrinks_the_warm_up_then_the_window_never_under_a_second() -> None:
    capped = T.steady_plan(args(), 6.0, "bf16", ["fp16"], True)
    assert capped is not None and (capped.window_s, capped.warm_max_s) == (2.0, pytest.approx(3.6))
    tight = T.steady_plan(args(), 5.0, "bf16", ["fp16"], True)
    assert tight is not None and tight.warm_max_s == pytest.approx(3.2)  # three periods can still be seen
    assert tight.window_s == pytest.approx(1.4)
    assert T.steady_plan(args(), 4.0, "bf16", [], True) is None  # not even three periods and a window
    later = T.steady_plan(args(), 2.7, "tf32", ["fp32"], False)
    assert later is not None and later.warm_max_s == pytest.approx(2.2)  # fp32 goes instead


class FakeTime:
    """The tester's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeCuda:
    def set_device(self, dev: Any) -> None:
        pass

    def get_device_properties(self, dev: Any) -> Any:
        return SimpleNamespace(
            name="NVIDIA H200",
            major=9,
            minor=0,
            multi_processor_count=132,
            L2_cache_size=60 << 20,
            total_memory=141 << 30,
        )

    def mem_get_info(self, dev: Any) -> tuple[int, int]:
        return 140 << 30, 141 << 30

    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        return True

    def empty_cache(self) -> None:
        pass


FAKE_TORCH = SimpleNamespace(device=lambda kind, index: (kind, index), cuda=FakeCuda())


def measure(
    monkeypatch: pytest.MonkeyPatch, budget: float, started: float = 4.0
) -> tuple[dict[str, Any], list[str]]:
    """measure_device on the fake clock, `started` seconds into a run of `budget` seconds."""
    clock = FakeTime()
    monkeypatch.setattr(T, "time", clock)
    monkeypatch.setattr(T, "T0", clock.now - started)
    planned: list[str] = []

    def fake_rate(
        torch: Any, dev: Any, name: str, n: int, l2: int, how: Any, sampler: Any = None
    ) -> dict[str, Any]:
        planned.append(name)
        # getattr: the same fake drives tester 1.2, which these tests failed against (issue 36)
        window = 0.0 if getattr(how, "follow_on", False) else how.window_s
        clock.now += how.warm_max_s + window + getattr(T, "RATE_OVERHEAD_S", 0.4)
        return {
            "tflops": 500.0,
            "median_ms": 2.0,
            "burst_tflops": 520.0,
            "window_s": how.window_s,
            "warmup_s": how.warm_max_s,
            "settled": True,
            "rel_err": 1e-3,
            "ok": True,
        }

    def fake_copy(*a: Any, **k: Any) -> dict[str, Any]:
        clock.now += 0.6
        return {"d2d_gbps": 4200.0, "d2d_bytes": 1 << 30, "h2d_pinned_gbps": 55.0, "d2h_pinned_gbps": 55.0}

    monkeypatch.setattr(T, "matmul_dtype", fake_rate)
    monkeypatch.setattr(T, "bandwidth", fake_copy)
    run_args = args("--budget", str(budget))
    warnings: list[str] = []
    if hasattr(T, "budget_warning"):
        T.budget_warning(run_args, T.Clock(budget), 1, warnings)
        info = T.measure_device(FAKE_TORCH, 0, run_args, T.Clock(budget), {}, budget, None, "off", warnings)
    else:
        info = T.measure_device(FAKE_TORCH, 0, run_args, T.Clock(budget), {}, budget, None, "off")
    info["planned"] = planned
    return info, warnings


def test_budget_20_measures_the_headline_first_and_says_what_it_skips(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 5: `--budget 20` on an H200 dropped bf16 and passed without a word. Now bf16
    (the headline) comes first; on the worst case every rate takes its longest, later rates give
    way, and each skip is a line of its own and listed in `skipped`."""
    info, warnings = measure(monkeypatch, 20.0)
    out = capsys.readouterr().out
    assert "bf16" in info["matmul"] and info["planned"][0] == "bf16"
    assert info["skipped"], "the worst case does not fit 20 s: something must give, and be said"
    assert all(s.endswith(":budget") and "bf16" not in s for s in info["skipped"])
    for skipped in info["skipped"]:
        name = skipped.split(":")[1]
        assert f"gpu0 {name}: skipped, the budget has" in out
    assert warnings and "bf16 goes first" in warnings[0] and "warning: " in out


def test_a_generous_budget_skips_nothing_and_warns_of_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    info, warnings = measure(monkeypatch, 45.0)
    assert set(info["matmul"]) == {"size", "bf16", "fp16", "tf32", "fp32"}
    assert info["planned"] == ["bf16", "fp16", "tf32", "fp32"]
    assert info["skipped"] == [] and warnings == []
    assert set(info["phases"]) >= {"context", "bf16", "fp16", "tf32", "fp32", "copy"}


def test_a_budget_too_short_for_the_headline_measures_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    info, warnings = measure(monkeypatch, 8.0)
    assert set(info["matmul"]) == {"size"}
    assert [s.split(":")[1] for s in info["skipped"]] == ["bf16", "fp16", "tf32", "fp32"]
    assert warnings and "gpu0 bf16: skipped" in capsys.readouterr().out


def test_the_status_line_names_what_was_not_measured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_run(run_args: argparse.Namespace, reexec: bool = False) -> dict[str, Any]:
        return {"status": "pass", "reason": None, "skipped": ["gpu0:fp32:budget", "gpu0:bf16:unsupported"]}

    monkeypatch.setattr(T, "run", fake_run)
    monkeypatch.setenv("ACAGPU_RESULT_GRACE_S", "0")
    assert T.main(["--budget", "20"]) == 0
    status = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("status:"))
    assert status.endswith("; not measured: gpu0:fp32:budget")  # an unsupported dtype is no budget's doing
