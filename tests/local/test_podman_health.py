"""`acagpu local` judges GPU health through real Podman containers, on a machine without a GPU.

The image holds a stand-in `nvidia-smi` (a dash script, the only program in it) that prints a real
driver's outputs: the table without arguments, `nvidia-smi -q` with `-q`, as the mounted binary
would. Everything else is real: the runtime, the two containers, the engine, the exit code.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli
from tests.local.conftest import _build_rootfs

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
IMAGE = f"localhost/acagpu-test:smi-health-{os.getpid()}"  # this process's own (see conftest)
MADE: list[str] = []  # the images this test imported, removed after it
STAND_IN = """#!/bin/sh
# prints what the driver's nvidia-smi printed on a real machine (dash builtins only)
file=/smi/table.txt
[ "$1" = "-q" ] && file=/smi/q.txt
while IFS= read -r line; do printf '%s\\n' "$line"; done < "$file"
"""


def _body(prefix: str) -> str:
    return next(SMI.glob(prefix + "*.txt")).read_text(encoding="utf-8").split("\n", 3)[3]


def _add(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _image(podman: str, tmp: Path, query: str) -> str:
    tmp.mkdir()
    tar_path = _build_rootfs(tmp)
    with tarfile.open(tar_path, "a") as tar:
        _add(tar, "usr/bin/nvidia-smi", STAND_IN, 0o755)
        _add(tar, "smi/table.txt", _body("24-"))
        _add(tar, "smi/q.txt", query)
    tag = f"{IMAGE}-{tmp.name}"  # a tag each: an import under a tag in use leaves the old image untagged
    MADE.append(tag)
    done = subprocess.run([podman, "import", "-q", str(tar_path), tag], capture_output=True, text=True)
    assert done.returncode == 0, f"podman import failed: {done.stderr.strip()}"
    return tag


def local(image: str) -> Result:
    args = ["local", "--runtime", "podman", "--image", image, "--gpus", "none", "--no-tester", "-o", "json"]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_a_failed_gpu_is_exit_5_and_a_degraded_one_warns(podman: str, tmp_path: Path) -> None:
    dram = "            DRAM Uncorrectable                         : 0"
    failed = _body("95-").replace(dram, dram.replace(": 0", ": 2"), 1)
    result = local(_image(podman, tmp_path / "failed", failed))
    assert result.exit_code == 5, result.output
    doc = json.loads(result.stdout)
    assert doc["explorer"]["health"]["verdict"] == "failed"
    assert doc["error"]["message"].endswith(
        "GPU health failed: gpu0: 2 uncorrectable ECC error(s) since the driver loaded"
    )
    assert "nvidia-smi -q" in doc["commands"]["explorer_health"]

    result = local(_image(podman, tmp_path / "degraded", _body("90-")))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    health = doc["explorer"]["health"]
    said = (health, result.stderr[-1500:])
    assert health["verdict"] == "degraded" and doc["explorer"]["driver_version"], said
    assert "row remapping pending: a GPU reset applies it" in result.stderr


@pytest.fixture(autouse=True)
def _remove_image(podman: str) -> object:
    yield None
    while MADE:
        subprocess.run([podman, "rmi", "-f", MADE.pop()], capture_output=True, check=False)
