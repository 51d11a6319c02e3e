"""CUDA start-up retries: a failed cuInit is retried in a fresh process, and the result says so.

The policy is tested against a fake driver object; the re-exec end to end against a real shared
library built here that stands in for libcuda.so.1 and fails its first cuInit calls.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.gpu.tester_result import parse_tester_output

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "templates" / "gpu-tester" / "gpu_tester.py"

FAKE_LIBCUDA = r"""
#include <stdio.h>
#include <stdlib.h>
static int calls(void) {
    const char *path = getenv("FAKE_CUDA_COUNTER");
    int n = 0;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f) { if (fscanf(f, "%d", &n) != 1) n = 0; fclose(f); }
    f = path ? fopen(path, "w") : NULL;
    if (f) { fprintf(f, "%d", n + 1); fclose(f); }
    return n;
}
int cuInit(unsigned int flags) {
    const char *fails = getenv("FAKE_CUINIT_FAILS");
    int seen = calls();
    (void)flags;
    if (fails && seen < atoi(fails)) return 999;
    return 0;
}
int cuGetErrorName(int rc, const char **out) {
    *out = rc == 999 ? "CUDA_ERROR_UNKNOWN" : "CUDA_ERROR_OTHER";
    return 0;
}
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
"""


def _tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester_init", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeDriver:
    def __init__(self, codes: list[int]) -> None:
        self.codes = codes

    def cuInit(self, flags: int) -> int:
        return self.codes.pop(0)

    def cuGetErrorName(self, rc: int, out: Any) -> int:
        return 1  # the name is unknown to this driver: the tester falls back to the number


@pytest.mark.parametrize(
    ("codes", "state", "outcome", "attempts", "errors"),
    [
        ([0], {}, "ok", 1, []),
        ([999], {}, "retry", 1, ["CUresult 999"]),
        ([0], {"attempt": 1, "errors": ["CUresult 999"]}, "ok", 2, ["CUresult 999"]),
        ([999], {"attempt": 2, "errors": ["a", "b"]}, "final", 3, ["a", "b", "CUresult 999"]),
        ([100], {}, "final", 1, ["CUDA_ERROR_NO_DEVICE"]),  # no retry changes "no device"
        ([35], {}, "final", 1, ["CUDA_ERROR_INSUFFICIENT_DRIVER"]),
    ],
)
def test_retry_policy(
    codes: list[int], state: dict[str, Any], outcome: str, attempts: int, errors: list[str]
) -> None:
    got, record = _tester().cuda_init_step(FakeDriver(codes), state)
    assert got == outcome
    assert record["attempts"] == attempts and record["errors"] == errors
    assert record["ok"] is (outcome == "ok")


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda.so.1")
    where = tmp_path_factory.mktemp("fake-driver")
    (where / "fake.c").write_text(FAKE_LIBCUDA)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(where / "libcuda.so.1"), str(where / "fake.c")], check=True
    )
    return where


def _run(lib_dir: Path, fails: int, counter: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(lib_dir),
        "FAKE_CUDA_COUNTER": str(counter),
        "FAKE_CUINIT_FAILS": str(fails),
        "CUDA_VISIBLE_DEVICES": "",
        "ACAGPU_RESULT_GRACE_S": "0",
    }
    env.pop("ACAGPU_CUDA_INIT_STATE", None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--allow-cpu", "--cpu-budget", "0.05"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_failed_cuinit_is_retried_in_a_fresh_process(fake_libcuda: Path, tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    proc = _run(fake_libcuda, 1, counter)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "cuInit failed with CUDA_ERROR_UNKNOWN (attempt 1 of 3); retrying in a fresh process" in proc.stdout
    )
    assert counter.read_text() == "2"  # one failed call, one in the re-executed process
    assert "CUDA initialised on attempt 2 (earlier: CUDA_ERROR_UNKNOWN)" in proc.stdout
    result = parse_tester_output(proc.stdout)
    assert result.cuda_init_attempts == 2 and result.cuda_init_errors == ("CUDA_ERROR_UNKNOWN",)
    assert proc.stdout.count("ACAGPU_RESULT ") == 1
    assert result.elapsed_s is not None and result.elapsed_s >= 1.0  # the first attempt's wait counts


def test_retries_stop_after_three_attempts(fake_libcuda: Path, tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    proc = _run(fake_libcuda, 5, counter)
    assert counter.read_text() == "3"
    result = parse_tester_output(proc.stdout)
    assert result.cuda_init_attempts == 3 and len(result.cuda_init_errors) == 3
    assert result.raw["env"]["cuda_init"]["ok"] is False
