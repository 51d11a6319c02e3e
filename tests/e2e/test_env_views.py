"""`env list` is a table with a header; `env show NAME` shows one environment in detail (region,
profiles, storages, runs inside, idle TTL, spend), not the list's line again. Real processes against
`acagpu emulator serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def test_env_list_has_a_header_and_env_show_has_the_details(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG"):
            shell.pop(key, None)
        made = _acagpu(
            shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--idle-ttl", "12h", "--yes"
        )
        assert made.returncode == 0, made.stderr
        storage = (
            f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/"
            "rg-acagpu-env-lab/providers/Microsoft.App/managedEnvironments/cae-acagpu-env-lab/storages/datasets"
        )
        share = {
            "accountName": "acct",
            "accountKey": "k3y",
            "shareName": "datasets",
            "accessMode": "ReadWrite",
        }
        put = requests.put(
            storage,
            params={"api-version": "2025-07-01"},
            json={"properties": {"azureFile": share}},
            headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
            verify=emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        )
        assert put.status_code in (200, 201), put.text

        listed = _acagpu(shell, "env", "list")
        assert listed.returncode == 0, listed.stderr
        header, row = listed.stdout.splitlines()[:2]
        assert header.split()[:3] == ["NAME", "STATE", "REGION"], listed.stdout
        assert row.split()[:3] == ["lab", "idle", "eastus"], listed.stdout

        shown = _acagpu(shell, "env", "show", "lab")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout != listed.stdout
        text = shown.stdout
        for needle in ("region", "eastus", "Consumption-GPU-NC8as-T4", "storages", "datasets", "runs inside",
                       "idle TTL", "12h", "spend"):  # fmt: skip
            assert needle in text, (needle, text)
        assert "k3y" not in text  # a storage's key is never shown

        doc = json.loads(_acagpu(shell, "env", "show", "lab", "-o", "json").stdout)
        assert doc["storages"] == ["datasets"] and doc["location"] == "eastus"
        assert doc["spend"]["runs_usd_estimate"] == 0.0 and doc["spend"]["idle_usd_per_hour"] == 0.0, doc
