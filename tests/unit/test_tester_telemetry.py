"""The tester's telemetry arithmetic: sample summaries, the per-GPU verdict, the clock-allowed rate.

Pure functions of the standalone script, fed NVML-shaped samples: (SM MHz, memory MHz, W, °C,
busy %, clock event reason bits). The GPU side (real NVML) is in tests/gpu.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "templates" / "gpu-tester" / "gpu_tester.py"
STATIC = {"sm_clock_max_mhz": 1980, "power_limit_w": 700.0, "slowdown_temp_c": 89, "app_sm_clock_mhz": 1980}
POWER_CAP, HW_THERMAL, APP_CLOCKS, IDLE = 0x4, 0x40, 0x2, 0x1


@pytest.fixture(scope="module")
def tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester_telemetry", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _samples(sm: int, watts: float, temp: int, bits: int, n: int = 10, on: int | None = None) -> list[tuple]:
    """n samples, the reason bits set in the first `on` of them (all by default)."""
    on = n if on is None else on
    return [(sm, 2619, watts, temp, 99, bits if i < on else 0) for i in range(n)]


def test_summary_is_medians_and_reason_shares(tester: Any) -> None:
    samples = _samples(1500, 690.0, 70, POWER_CAP, n=8, on=6) + [(1980, 2619, 300.0, 60, 40, IDLE)] * 2
    summary = tester.summarize(samples)
    assert summary["samples"] == 10
    assert summary["sm_clock_mhz"] == 1500 and summary["sm_clock_min_mhz"] == 1500
    assert summary["power_w"] == 690.0 and summary["temp_max_c"] == 70
    assert summary["reasons"] == {"idle": 0.2, "sw-power-cap": 0.6}
    assert tester.summarize([]) == {"samples": 0}


def test_values_nvml_declines_are_left_out(tester: Any) -> None:
    summary = tester.summarize([(1400, None, None, 50, None, None), (1600, None, None, 52, None, None)])
    assert summary["sm_clock_mhz"] == 1500 and summary["power_w"] is None and summary["reasons"] == {}


@pytest.mark.parametrize(
    ("measured", "expected"),
    [
        ([("bf16", _samples(1980, 500.0, 60, 0))], "nominal"),
        ([("bf16", _samples(1980, 500.0, 60, IDLE))], "nominal"),  # idle gaps are not a limit
        ([("bf16", _samples(1515, 700.0, 70, POWER_CAP))], "power-capped"),
        ([("bf16", _samples(1515, 700.0, 70, POWER_CAP, on=1))], "nominal"),  # one sample in ten: noise
        ([("fp16", _samples(1300, 600.0, 90, HW_THERMAL | POWER_CAP))], "thermal"),  # thermal outranks power
        ([("fp32", _samples(1200, 300.0, 91, 0))], "thermal"),  # past the slowdown temperature
        ([("bf16", _samples(1410, 400.0, 60, APP_CLOCKS))], "clocks-held"),
    ],
)
def test_verdicts(tester: Any, measured: list[tuple[str, list[tuple]]], expected: str) -> None:
    verdict, evidence = tester.verdict(STATIC, [(label, tester.summarize(s)) for label, s in measured])
    assert verdict == expected
    assert (evidence == []) == (expected == "nominal")


def test_evidence_names_the_reason_the_measurement_and_the_numbers(tester: Any) -> None:
    measured = [
        ("fp16", tester.summarize(_samples(1600, 690.0, 70, POWER_CAP))),
        ("bf16", tester.summarize(_samples(1425, 783.6, 71, POWER_CAP))),
    ]
    verdict, evidence = tester.verdict(STATIC, measured)
    # equal shares: the lower clock is the stronger evidence
    assert (verdict, evidence) == (
        "power-capped",
        ["sw-power-cap in 100% of bf16 samples, 783.6 of 700.0 W, SM 1425 of 1980 MHz"],
    )


def test_rate_at_the_observed_clock(tester: Any) -> None:
    row: dict[str, Any] = {"tflops": 715.6, "telemetry": {"sm_clock_mhz": 1515}}
    tester.clock_context(row, 989.0, 1830)
    assert row["at_clock_tflops"] == 818.8 and row["pct_of_clock"] == 87.4
    unknown: dict[str, Any] = {"tflops": 100.0, "telemetry": {"sm_clock_mhz": 1515}}
    tester.clock_context(unknown, None, 1830)  # no datasheet peak: no guess
    assert "at_clock_tflops" not in unknown
    untimed: dict[str, Any] = {"tflops": 100.0}
    tester.clock_context(untimed, 989.0, 1830)
    assert "pct_of_clock" not in untimed


def test_without_nvml_the_device_record_says_why(tester: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tester, "NVML_LIB", "libnvidia-ml-not-here.so.1")
    nvml, why = tester.Nvml.open()
    assert nvml is None and "not in this image" in why
    sampler, record = tester.device_telemetry(nvml, why, object(), 0, 0.02)
    assert sampler is None and record == {"available": False, "reason": why}
