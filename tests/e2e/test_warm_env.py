"""Warm environments against `acagpu emulator serve` in a second shell: real processes throughout.

`env create` → two `up --env` at the same time → both pass with their own results → the environment
holds no replica, app or job of either run and lists idle at $0/h → `env delete --yes` leaves nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _run(shell: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _control(emu: dict[str, str], name: str) -> dict[str, Any]:
    response = requests.get(
        f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/{name}",
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    )
    response.raise_for_status()
    doc: dict[str, Any] = response.json()
    return doc


def test_two_runs_share_a_warm_environment_and_leave_it_idle(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.05"}
        shell.pop("ACAGPU_ENV", None)

        refused = _run(shell, "up", "--env", "nowhere", "--yes", "-o", "json")
        assert refused.returncode == 2, refused.stderr  # no such environment: nothing was created
        assert "acagpu env create nowhere" in json.loads(refused.stdout)["error"]["hint"]

        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        created = json.loads(made.stdout)
        assert created["state"] == "idle"
        assert {"name": "gpu-t4", "type": "Consumption-GPU-NC8as-T4"} in created["profiles"]

        runs = [
            subprocess.Popen(
                [*ACAGPU, "up", "--env", "lab", "--run-id", rid, "--yes", "-o", "json"],
                env=shell,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rid in ("warma", "warmb")
        ]
        docs = []
        for proc in runs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            docs.append(json.loads(out))
        for rid, doc in zip(("warma", "warmb"), docs, strict=True):
            assert doc["run_id"] == rid and doc["status"] == "ok"
            assert doc["resources"]["probe_job"] == f"cuda-probe-{rid}"
            assert doc["resources"]["resource_group"] == "rg-acagpu-env-lab"
            assert doc["explorer"]["driver_version"] and doc["explorer"]["gpus"]
            assert doc["tester"]["status"] == "pass" and doc["tester"]["result"]["gpu_name"]
            assert doc["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}
        billed = _control(emu, "billing")["runs"]
        assert billed["warma"]["replicas"] == 2 and billed["warmb"]["replicas"] == 2  # probe + tester

        inventory = _control(emu, "inventory")
        assert inventory["apps"] == [] and inventory["jobs"] == [] and inventory["replicas"] == []
        assert [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]

        listed = _run(shell, "env", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        (lab,) = json.loads(listed.stdout)["environments"]
        assert lab["state"] == "idle" and lab["runs"] == [] and lab["replicas_running"] == 0
        assert lab["idle_cost"]["usd_per_hour"] == 0.0 and "serverless-only" in lab["idle_cost"]["basis"]
        assert lab["last_used"] >= created["last_used"]

        gone = _run(shell, "env", "delete", "lab", "--yes", "-o", "json")
        assert gone.returncode == 0, gone.stderr
        assert json.loads(gone.stdout)["teardown"]["billing_stopped"] is True
        deadline = time.monotonic() + 30  # the environment's delete: minutes on Azure, ~1 s here
        while not _control(emu, "inventory")["empty"]:
            assert time.monotonic() < deadline, _control(emu, "inventory")
            time.sleep(0.1)
