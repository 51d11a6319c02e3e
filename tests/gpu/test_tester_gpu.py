"""The gpu-tester on a real GPU: a quick run passes and parses, and its checks catch a wrong product.

Skips cleanly where torch has no CUDA device (CI); run on a GPU host with
`python -m pytest -q tests/gpu`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from aca_gpu.gpu.tester_result import parse_tester_output  # noqa: E402
from aca_gpu.gpu.tester_result import summary_lines as summary_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "templates" / "gpu-tester" / "gpu_tester.py"
PEAKS = ROOT / "tests" / "fixtures" / "tester" / "gpus.json"
NO_GRACE = {**os.environ, "ACAGPU_RESULT_GRACE_S": "0"}


def _tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _WrongMatmul:
    """torch, except that mm corrupts its output the way a broken GPU or library would."""

    def __init__(self, corrupt: str) -> None:
        self._corrupt = corrupt

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    def mm(self, a: Any, b: Any, out: Any) -> Any:
        torch.mm(a, b, out=out)
        if self._corrupt == "scale":
            out.mul_(1.05)
        else:
            out[0, 0] = float("nan")
        return out


def test_quick_run_passes_and_parses() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peaks", str(PEAKS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=NO_GRACE,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = parse_tester_output(proc.stdout)
    assert result.passed and result.correct is True
    assert result.gpu_count == torch.cuda.device_count()
    assert result.gpu_name == torch.cuda.get_device_name(0)
    assert {"fp32", "tf32", "fp16"} <= set(result.rates)
    # tensor cores beat plain fp32 on every GPU that has them; a mix-up of dtypes would not
    assert result.rates["fp16"].tflops > result.rates["fp32"].tflops > 0
    assert result.bandwidth_gbps["d2d"] > 50
    assert result.cpu_gflops and result.speedup and result.speedup > 1
    known = result.gpu_name in json.loads(PEAKS.read_text())["gpus"]
    assert (result.rates["fp16"].pct_of_peak is not None) == known
    assert "Elapsed Time: " in proc.stdout


@pytest.mark.parametrize("corrupt", ["scale", "nan"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_correctness_check_catches_a_wrong_product(dtype: str, corrupt: str) -> None:
    tester = _tester()
    dev = torch.device("cuda", 0)
    good = tester.matmul_dtype(torch, dev, dtype, 1024, 50 << 20, tester.Steady(1.0, 0.3, 1.0))
    bad = tester.matmul_dtype(_WrongMatmul(corrupt), dev, dtype, 1024, 50 << 20, tester.Steady(1.0, 0.3, 1.0))
    assert good["ok"] is True and good["rel_err"] < good["bound"]
    assert bad["ok"] is False


def test_timing_counts_every_iteration() -> None:
    """A step that costs twice as much must time about twice as long (no lost or doubled iterations)."""
    tester = _tester()
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")

    def once(i: int) -> None:
        torch.mm(a, b)

    def twice(i: int) -> None:
        torch.mm(a, b)
        torch.mm(a, b)

    one = tester.time_gpu(torch, once, target_ms=20, repeats=5, warm_ms=30)
    two = tester.time_gpu(torch, twice, target_ms=20, repeats=5, warm_ms=30)
    assert 1.7 < two / one < 2.3


def test_budget_bounds_the_run() -> None:
    """A budget shorter than a full run skips measurements (and says so) instead of overrunning."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--budget", "3", "--peaks", str(PEAKS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=NO_GRACE,
    )
    result = parse_tester_output(proc.stdout)
    assert result.elapsed_s is not None and result.elapsed_s < 6  # a full run takes longer
    skipped = result.raw.get("skipped", [])
    assert any(s.endswith(":budget") for s in skipped), skipped
    measured = set(result.rates) | {s.split(":")[1] for s in skipped if s.startswith("gpu0:")}
    assert {"fp32", "tf32", "fp16"} <= measured  # every dtype either measured or listed as skipped
    assert proc.returncode == (0 if result.passed else 1)
    if not result.rates:
        assert result.reason == "budget-exceeded"


def test_sampler_reads_the_gpu_while_a_measurement_runs() -> None:
    tester = _tester()
    nvml, why = tester.Nvml.open()
    if nvml is None:
        pytest.skip(f"no NVML here: {why}")
    try:
        props = torch.cuda.get_device_properties(0)
        handle = nvml.handle(props, 0)
        assert handle is not None
        static = nvml.static(handle)
        sampler = tester.Sampler(nvml, handle, 0.01)
        row = tester.matmul_dtype(
            torch, torch.device("cuda", 0), "bf16", 4096, 50 << 20, tester.Steady(1.0, 0.3, 1.5), sampler
        )
    finally:
        nvml.close()
    tel = row["telemetry"]
    assert tel["samples"] >= 3
    assert 100 <= tel["sm_clock_mhz"] <= static["sm_clock_max_mhz"]
    # sampled while the GPU worked: clocked up from idle (an idle H100 sits at 345 of 1980 MHz); NVML's
    # utilisation is an average over up to a second, so it lags a loop this short and is not asserted
    assert tel["sm_clock_min_mhz"] >= 0.5 * static["sm_clock_max_mhz"]
    assert 0 <= tel["util_pct"] <= 100
    assert 0 < tel["power_w"] <= 1.2 * static["power_limit_w"]
    assert set(tel["reasons"]) <= {name for _, name in tester.REASON_BITS}


def test_without_nvml_the_tester_still_measures_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    tester = _tester()
    monkeypatch.setattr(tester, "NVML_LIB", "libnvidia-ml-not-in-this-image.so.1")
    result = tester.run(tester.parse_args(["--quick", "--dtypes", "fp32,bf16", "--peaks", str(PEAKS)]))
    assert result["status"] == "pass", result
    assert result["telemetry"]["available"] is False
    assert "not in this image" in result["telemetry"]["reason"]
    device = result["devices"][0]
    assert device["telemetry"]["available"] is False
    assert "telemetry" not in device["matmul"]["bf16"] and device["matmul"]["bf16"]["tflops"] > 0
    parsed = parse_tester_output("ACAGPU_RESULT " + json.dumps(result))
    assert parsed.telemetry_available is False
    assert "telemetry unavailable" in " ".join(summary_of(parsed))


def test_default_run_reports_telemetry_per_gpu() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peaks", str(PEAKS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=NO_GRACE,
    )
    result = parse_tester_output(proc.stdout)
    if not result.telemetry_available:
        pytest.skip(f"no NVML here: {result.telemetry_note}")
    assert len(result.gpu_telemetry) == torch.cuda.device_count()
    for gpu in result.gpu_telemetry:
        assert gpu.verdict in ("nominal", "power-capped", "thermal", "clocks-held")
        assert gpu.sm_clock_mhz and gpu.power_w and gpu.temp_c is not None
    assert len(summary_of(result)) == torch.cuda.device_count()
