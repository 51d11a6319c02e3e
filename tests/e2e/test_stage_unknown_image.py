"""`image stage` of an image that does not exist fails as Azure's import does, leaving nothing made.

`image stage nosuch/image:1 --env lab --no-inspect` exited 0 and named a staged copy of an image
that exists nowhere: the emulator's importImage copied any name. On Azure the import's long-running
operation fails for a source it cannot read; the emulator's now fails for an image it cannot know
(docs/emulator.md), and the client says so in one line, exit 2, with the registry it made for that
import gone again.

Real processes: `acagpu emulator serve` and the CLI as subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
TORCH = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def _run(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _registry_status(emu: dict[str, str], name: str) -> int:
    path = (
        f"/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/rg-acagpu-env-lab/providers/"
        f"Microsoft.ContainerRegistry/registries/{name}"
    )
    return requests.get(
        f"{emu['ACAGPU_ARM_ENDPOINT']}{path}",
        params={"api-version": "2025-11-01"},
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    ).status_code


def test_staging_an_image_that_does_not_exist_fails_and_leaves_nothing(tmp_path: Path) -> None:
    from aca_gpu.workflow.env.staging.catalogue import registry_name

    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        name = registry_name(emu["ACAGPU_SUBSCRIPTION"], "lab")

        refused = _run(
            shell, "image", "stage", "nosuch/image:1", "--env", "lab", "--no-inspect", "--yes", "-o", "json"
        )
        assert refused.returncode == 2, refused.stdout + refused.stderr
        error = json.loads(refused.stdout)["error"]
        assert "nosuch/image:1" in error["message"], error
        assert "\n" not in error["message"] and "Traceback" not in refused.stderr
        assert len([line for line in refused.stderr.splitlines() if line.startswith("error:")]) == 1
        assert _registry_status(emu, name) == 404  # the registry made for it went again

        # an image the emulator knows still stages; then an unknown one next to it leaves the
        # known one staged and recorded, and the registry in place
        stage = ("image", "stage", TORCH, "nosuch/image:1", "--env", "lab", "--no-inspect", "--yes")
        both = _run(shell, *stage, "-o", "json")
        assert both.returncode == 2, both.stdout + both.stderr
        assert _registry_status(emu, name) == 200
        shown = json.loads(_run(shell, "env", "show", "lab", "-o", "json").stdout)
        staged = [i["image"] for i in shown["staged"]["images"]]
        assert staged == [f"docker.io/{TORCH}"], shown["staged"]
