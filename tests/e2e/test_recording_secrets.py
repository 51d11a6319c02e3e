"""`--record` against `acagpu emulator serve` in a second shell: the storage account keys that a
`run --create-share` reads (listKeys) must be nowhere in the recording folder, in any encoding.

The reproduction of issue 26, item 1, as a user types it: `env create lab`, then `run --env lab
--record DIR --mount models:/m --create-share IMAGE -- sh -c 'echo hi'`. The keys are the emulator's
own: this test asks the emulator for them (its listKeys) after the run, and looks for every one.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from urllib.parse import quote

import requests

from tests.e2e.serving import ACAGPU, emulator_serve

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _storage_keys(emu: dict[str, str], group: str, account: str) -> list[str]:
    """Every key of the storage account, as the emulator's listKeys answers it."""
    base = f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/{group}"
    answer = requests.post(
        f"{base}/providers/Microsoft.Storage/storageAccounts/{account}/listKeys",
        params={"api-version": "2023-05-01", "$expand": "kerb"},
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=30,
    )
    answer.raise_for_status()
    return [str(k["value"]) for k in answer.json()["keys"]]


def _forms(value: str) -> set[str]:
    """A key as JSON, a URL or a log might carry it: as is, URL-quoted, without its padding, and
    its first 20 characters (a key cut short still gives most of it away)."""
    forms = {value, quote(value, safe=""), value.rstrip("="), value[:20]}
    raw = value.encode()
    forms.add(base64.b64encode(raw).decode().rstrip("="))
    return forms


def test_a_recorded_create_share_run_holds_no_storage_key(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
        shell |= emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "NO_COLOR": "1"}
        made = _acagpu(shell, "env", "create", "lab", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        planned = _acagpu(shell, "run", "--env", "lab", "--dry-run", "-o", "json", "--mount", "models:/m",
                          "--create-share", IMAGE)  # fmt: skip
        assert planned.returncode == 0, planned.stderr
        account = json.loads(planned.stdout)["create_share"]["storage_account"]
        folder = tmp_path / "rec"
        ran = _acagpu(shell, "run", "--yes", "--env", "lab", "--record", str(folder), "--mount", "models:/m",
                      "--create-share", IMAGE, "--", "sh", "-c", "echo hi")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines()[0] == "hi"
        keys = _storage_keys(emu, "rg-acagpu-env-lab", account)

    assert len(keys) >= 2 and all(len(k) >= 40 for k in keys)  # key1, key2 (and kerb keys if any)
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    assert {p.name for p in files} == {"recording.jsonl", "meta.json"}
    texts = {p.name: p.read_text(encoding="utf-8") for p in files}
    assert "listKeys" in texts["recording.jsonl"]  # the answer was recorded (its keys replaced)
    leaks = [f"{name}: {form[:12]}..." for name, text in texts.items() for k in keys for form in _forms(k)
             if form in text]  # fmt: skip
    assert leaks == []
    # and not in what acagpu printed either
    assert not [k for k in keys if k[:20] in ran.stdout + ran.stderr]
