"""Zero-build mode: the tester travels in an env var into a stock PyTorch image and runs unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aca_gpu import tester
from aca_gpu.errors import BadInput
from aca_gpu.gpu.tester_result import parse_tester_output

PEAKS = Path(__file__).resolve().parents[1] / "fixtures" / "tester" / "gpus.json"


def test_spec_runs_the_packaged_script_through_python_c() -> None:
    spec = tester.zero_build_container(args=["--quick"], peaks=PEAKS)
    assert spec.image == tester.DEFAULT_TESTER_IMAGE
    assert spec.image.startswith("pytorch/pytorch:") and "cuda12" in spec.image
    assert spec.command == ["python", "-c", tester.BOOTSTRAP]
    assert spec.args == ["--quick"]
    assert tester.decode_source(spec.env[tester.SRC_ENV]) == tester.tester_script_path().read_bytes()
    assert json.loads(spec.env[tester.PEAKS_ENV]) == json.loads(PEAKS.read_text(encoding="utf-8"))
    assert spec.as_dict()["env"] == spec.env


def test_env_values_stay_well_under_acas_limit() -> None:
    spec = tester.zero_build_container(peaks=PEAKS)
    for value in spec.env.values():
        assert len(value.encode()) < 32 * 1024
    assert len(tester.BOOTSTRAP) < 400


def test_oversized_env_value_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "gpu_tester.py"
    big.write_bytes(os.urandom(40 * 1024))  # incompressible
    with pytest.raises(BadInput, match=tester.SRC_ENV):
        tester.zero_build_container(script=big, peaks=PEAKS)


def test_missing_peaks_table_means_no_peaks_env(tmp_path: Path) -> None:
    spec = tester.zero_build_container(peaks=tmp_path / "absent.json")
    assert tester.PEAKS_ENV not in spec.env


def _run_spec(spec: tester.TesterContainerSpec) -> subprocess.CompletedProcess[str]:
    """What the container runtime does: command + args, the template's env over the image's."""
    argv = [sys.executable, *spec.command[1:], *spec.args]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **spec.env}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_bootstrap_runs_the_real_script_end_to_end() -> None:
    spec = tester.zero_build_container(args=tester.tester_args(quick=True, allow_cpu=True), peaks=PEAKS)
    proc = _run_spec(spec)
    assert proc.returncode == 0, proc.stderr
    result = parse_tester_output(proc.stdout)
    assert result.passed and result.cpu_gflops


def test_bootstrap_passes_exit_codes_through() -> None:
    failed = _run_spec(tester.zero_build_container(args=["--quick"], peaks=PEAKS))
    assert failed.returncode == 1 and parse_tester_output(failed.stdout).reason == "no-cuda"
    bad = _run_spec(tester.zero_build_container(args=["--dtypes", "fp8"], peaks=PEAKS))
    assert bad.returncode == 2 and "unknown dtype" in bad.stderr


def test_tester_args_validate_before_deploying() -> None:
    assert tester.tester_args() == []
    assert tester.tester_args(budget=30, quick=True, allow_cpu=True) == [
        "--budget",
        "30",
        "--quick",
        "--allow-cpu",
    ]
    with pytest.raises(BadInput):
        tester.tester_args(budget=0)


def test_script_path_is_the_template() -> None:
    path = tester.tester_script_path()
    assert path.name == "gpu_tester.py" and path.parent.name == "gpu-tester"
