"""A staged same-region pull is faster than the public registry's under every durations profile.

At the default `recorded` durations a pull took 30-90 s by the image's name wherever it came from,
so a staged copy (`acagpulab….azurecr.io/nvidia/cuda:…`) pulled no faster than Docker Hub (67 s vs
63-65 s). And `run -o json`'s `image_pull` should carry bytes and MB/s where the platform's
`ImagePulled` event gives the size (the aca-2026 kubelet text does; the recorded one does not).

Real processes: `acagpu emulator serve` per durations profile, the CLI as subprocesses: one run
pulls from Docker Hub, the image is staged, the same run pulls the staged copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.1.1-base-ubuntu22.04"


def _run(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _pull(shell: dict[str, str]) -> dict[str, Any]:
    done = _run(shell, "run", "--yes", "--env", "lab", "-o", "json", IMAGE, "--", "sh", "-c", "exit 0")
    assert done.returncode == 0, done.stdout + done.stderr
    pulls: list[dict[str, Any]] = []

    def walk(doc: Any) -> None:
        if isinstance(doc, dict):
            if isinstance(doc.get("image_pull"), dict):
                pulls.append(doc["image_pull"])
            for value in doc.values():
                walk(value)
        elif isinstance(doc, list):
            for value in doc:
                walk(value)

    walk(json.loads(done.stdout))
    assert pulls, done.stdout
    return pulls[-1]


@pytest.mark.parametrize("durations", ["recorded", "aca-2026"])
def test_a_staged_same_region_pull_is_faster_than_docker_hub(tmp_path: Path, durations: str) -> None:
    with emulator_serve(tmp_path / "emu.env", extra=("--durations", durations)) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        public = _pull(shell)
        assert public["from"] == "docker.io", public
        staged = _run(shell, "image", "stage", IMAGE, "--env", "lab", "--no-inspect", "--yes")
        assert staged.returncode == 0, staged.stderr
        near = _pull(shell)
        assert near["from"].endswith(".azurecr.io"), near
        assert near["seconds"] < public["seconds"], (near, public)
        if durations == "aca-2026":  # the kubelet's text says the size: bytes and MB/s are filled
            for pull in (public, near):
                assert pull["bytes"] and pull["mb_per_s"], pull
            assert near["mb_per_s"] > public["mb_per_s"], (near, public)
