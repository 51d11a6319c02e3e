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


def test_spec_runs_the_packaged_script_through_a_shell_line() -> None:
    spec = tester.zero_build_container(args=["--quick"], peaks=PEAKS)
    assert spec.image == tester.DEFAULT_TESTER_IMAGE
    assert spec.image.startswith("pytorch/pytorch:") and "cuda12" in spec.image
    assert spec.command == ["/bin/sh", "-c", tester.LAUNCH, "gpu-tester"]
    assert f"'{tester.BOOTSTRAP}'" in tester.LAUNCH and "'" not in tester.BOOTSTRAP
    assert spec.env[tester.GRACE_ENV] == "15"
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


def _image_bin(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """An image's PATH holding only these interpreters: wrappers that log their name, then run ours."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\necho {name} >> "{tmp_path}/used"\nexec {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir


def _run_spec(
    spec: tester.TesterContainerSpec, bin_dir: Path, grace: str = "0"
) -> subprocess.CompletedProcess[str]:
    """What the container runtime does: command + args as given, the template's env over the image's."""
    env = {
        **os.environ,
        **spec.env,
        "PATH": str(bin_dir),
        "CUDA_VISIBLE_DEVICES": "",
        tester.GRACE_ENV: grace,
    }
    argv = [*spec.command, *spec.args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_launch_runs_the_real_script_with_only_python3(tmp_path: Path) -> None:
    """nvidia/cuda images with apt's python3 (or the Dockerfile's virtualenv) have no `python`."""
    spec = tester.zero_build_container(args=tester.tester_args(quick=True, allow_cpu=True), peaks=PEAKS)
    proc = _run_spec(spec, _image_bin(tmp_path, ("python3",)))
    assert proc.returncode == 0, proc.stderr
    result = parse_tester_output(proc.stdout)
    assert result.passed and result.cpu_gflops and result.telemetry_available is False
    assert (tmp_path / "used").read_text().split() == ["python3"]


@pytest.mark.parametrize(("names", "used"), [(("python",), "python"), (("python", "python3"), "python3")])
def test_launch_prefers_python3_and_falls_back_to_python(
    tmp_path: Path, names: tuple[str, ...], used: str
) -> None:
    bad = _run_spec(
        tester.zero_build_container(args=["--dtypes", "fp8"], peaks=PEAKS), _image_bin(tmp_path, names)
    )
    assert bad.returncode == 2 and "unknown dtype" in bad.stderr  # the tester itself answered
    assert (tmp_path / "used").read_text().split() == [used]


def test_launch_without_any_python_says_so(tmp_path: Path) -> None:
    proc = _run_spec(tester.zero_build_container(peaks=PEAKS), _image_bin(tmp_path, ()))
    assert proc.returncode == 127
    assert proc.stderr.strip() == "gpu-tester: this image has neither python3 nor python on its PATH"


def test_launch_passes_the_failure_exit_code_through(tmp_path: Path) -> None:
    failed = _run_spec(
        tester.zero_build_container(args=["--quick"], peaks=PEAKS), _image_bin(tmp_path, ("python3",))
    )
    assert failed.returncode == 1 and parse_tester_output(failed.stdout).reason == "no-cuda"


def test_result_grace_travels_in_the_env() -> None:
    assert tester.zero_build_container(peaks=PEAKS, result_grace_s=0).env[tester.GRACE_ENV] == "0"
    assert tester.zero_build_container(peaks=PEAKS, result_grace_s=2.5).env[tester.GRACE_ENV] == "2.5"
    with pytest.raises(BadInput, match="grace"):
        tester.zero_build_container(peaks=PEAKS, result_grace_s=-1)


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
