"""The standalone tester script: argument handling, the peaks table, and the CPU-only path (no GPU needed).

The CPU-only runs hide any GPU (CUDA_VISIBLE_DEVICES=""), so they take the same path on a GPU host.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.gpu.tester_result import parse_tester_output

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "templates" / "gpu-tester" / "gpu_tester.py"
PEAKS = ROOT / "tests" / "fixtures" / "tester" / "gpus.json"


def _tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester_script", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "ACAGPU_RESULT_GRACE_S": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        check=False,
    )


def test_script_imports_nothing_from_acagpu() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert "aca_gpu" not in text and "acagpu." not in text


@pytest.mark.parametrize(
    "argv",
    [
        ["--dtypes", "fp64"],
        ["--budget", "0"],
        ["--budget", "soon"],
        ["--size", "17"],
        ["--repeats", "-1"],
        ["--cpu-budget", "-1"],
        ["--no-such-flag"],
    ],
    ids=lambda a: " ".join(a),
)
def test_bad_arguments_exit_2_without_measuring(argv: list[str]) -> None:
    proc = _run(*argv)
    assert proc.returncode == 2
    assert "error:" in proc.stderr
    assert "ACAGPU_RESULT" not in proc.stdout


def test_arguments_parse_to_their_values() -> None:
    args = _tester().parse_args(["--budget", "20", "--quick", "--dtypes", "bf16,fp32", "--size", "4096"])
    assert (args.budget, args.quick, args.size) == (20.0, True, 4096)
    assert args.dtype_list == ["fp32", "bf16"]  # measured in the tester's fixed order
    defaults = _tester().parse_args([])
    assert defaults.budget == 45.0 and not defaults.quick and not defaults.allow_cpu
    assert defaults.dtype_list == ["fp32", "tf32", "fp16", "bf16"]


def test_peaks_table_from_file_env_and_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    tester = _tester()
    monkeypatch.delenv("ACAGPU_PEAKS", raising=False)
    assert tester.load_peaks(None) == {}
    table = tester.load_peaks(str(PEAKS))
    assert table["nvidia h100 80gb hbm3"]["bf16_tflops"] == 989.0
    assert table["h100 sxm"] is table["nvidia h100 80gb hbm3"]
    monkeypatch.setenv("ACAGPU_PEAKS", PEAKS.read_text(encoding="utf-8"))
    assert tester.load_peaks(None)["tesla t4"]["fp16_tflops"] == 65.0


def test_percent_of_peak_only_for_a_known_peak() -> None:
    tester = _tester()
    assert tester.pct(494.5, 989.0) == 50.0
    assert tester.pct(100.0, None) is None  # unknown GPU or dtype (T4 has no bf16): no guess
    assert tester.pct(None, 989.0) is None


def test_no_gpu_fails_with_reason_no_cuda() -> None:
    proc = _run("--quick")
    assert proc.returncode == 1
    result = parse_tester_output(proc.stdout)
    assert (result.status, result.reason) == ("fail", "no-cuda")
    assert result.cpu_gflops is not None and result.cpu_gflops > 0
    assert result.rates == {} and "Elapsed Time:" not in proc.stdout
    assert proc.stdout.count("ACAGPU_RESULT ") == 1


def test_allow_cpu_passes_with_the_cpu_baseline() -> None:
    proc = _run("--quick", "--allow-cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout.split("ACAGPU_RESULT ", 1)[1])
    assert doc["status"] == "pass" and doc["mode"] == "cpu-only"
    # the size is whatever fits the 0.5 s quick budget on this machine (128 on a loaded 2-core box)
    assert doc["cpu"]["size"] >= 128 and doc["cpu"]["gflops"] > 0
    assert doc["env"]["torch"] and doc["env"]["cuda_available"] is False


def test_cpu_baseline_respects_its_budget() -> None:
    torch = pytest.importorskip("torch")
    tester = _tester()
    start = time.monotonic()
    small = tester.cpu_baseline(torch, 0.05)
    spent = time.monotonic() - start
    # the size is what the budget decides (a tester that ignored it would reach the largest); the
    # wall time only has to stay far from a full-size baseline, on however busy a machine
    assert small["size"] < 2048 and small["gflops"] > 0
    assert spent < 15.0
    assert small["gflops"] == pytest.approx(
        2 * small["size"] ** 3 / (small["median_ms"] / 1e3) / 1e9, rel=0.02
    )


def test_cudart_probe_reports_the_library_it_loaded() -> None:
    probe = _tester().probe_cudart()
    assert set(probe) >= {"found", "path"}
    if probe["found"]:
        assert probe["runtime_version"] and probe["runtime_version"][0].isdigit()
        assert "site-packages" not in str(probe["path"]) or probe["path"].startswith("libcudart")


def _until_result(proc: subprocess.Popen[str]) -> float:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ACAGPU_RESULT "):
            return time.monotonic()
    raise AssertionError("no result line")


def _spawn(grace: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "ACAGPU_RESULT_GRACE_S": grace}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--quick", "--cpu-budget", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_result_grace_keeps_the_process_alive_then_exits_with_the_verdict() -> None:
    proc = _spawn("1.5")
    printed = _until_result(proc)
    assert proc.wait(timeout=30) == 1  # no-cuda: the verdict, not the wait, sets the exit code
    assert time.monotonic() - printed >= 1.4


def test_sigterm_during_the_grace_ends_it_at_once_with_the_verdict() -> None:
    proc = _spawn("60")
    _until_result(proc)
    time.sleep(0.2)
    assert proc.poll() is None  # still in its grace period
    start = time.monotonic()
    proc.terminate()
    assert proc.wait(timeout=30) == 1
    assert time.monotonic() - start < 20  # at once, against the 60 s grace it was in (exit is CPU-bound)


def test_grace_value_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    tester = _tester()
    for text, value in [("", 15.0), ("0", 0.0), ("2.5", 2.5), ("-3", 0.0), ("soon", 15.0), ("nan", 15.0)]:
        monkeypatch.setenv("ACAGPU_RESULT_GRACE_S", text)
        assert tester.grace_seconds() == value, text
    monkeypatch.delenv("ACAGPU_RESULT_GRACE_S")
    assert tester.grace_seconds() == 15.0


def test_no_gpu_run_says_telemetry_was_unavailable() -> None:
    proc = _run("--quick", "--allow-cpu", "--cpu-budget", "0.05")
    assert "telemetry: unavailable (no CUDA device)" in proc.stdout
    result = parse_tester_output(proc.stdout)
    assert result.schema == 3 and result.telemetry_available is False
    assert result.telemetry_note == "no CUDA device" and result.gpu_telemetry == ()


@pytest.mark.parametrize("value", ["3", "6000", "-5"])
def test_bad_telemetry_interval_exits_2(value: str) -> None:
    proc = _run("--telemetry-ms", value)
    assert proc.returncode == 2 and "--telemetry-ms" in proc.stderr


def test_only_the_result_line_names_the_result_tag(capsys: pytest.CaptureFixture[str]) -> None:
    """Log followers stop at the first line holding the tag: no earlier line may hold it."""
    proc = _run("--quick", "--cpu-budget", "0.05", env={"ACAGPU_RESULT_GRACE_S": "0.5"})
    tagged = [line for line in proc.stdout.splitlines() if "ACAGPU_RESULT" in line]
    assert len(tagged) == 1 and tagged[0].startswith("ACAGPU_RESULT {")
    assert "staying 0.5s so this log can still be read" in proc.stdout
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACAGPU_RESULT_GRACE_S", "soon")
        assert _tester().grace_seconds() == 15.0
    warning = capsys.readouterr().out
    assert "is not a number" in warning and "ACAGPU_RESULT" not in warning
