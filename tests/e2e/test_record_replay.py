"""`acagpu up --emulator --record DIR`, then `acagpu emulator replay DIR` and a second `acagpu up`
against it: real processes throughout. The recording must hold no secret, the replayed run must
reach the recorded verdict through exactly the recorded exchanges, and a run that asks for anything
else must be refused by the replay."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from aca_gpu.emulator.server import SUBSCRIPTION
from aca_gpu.recording import EMAIL, GUID, META_FILE, RECORDING_FILE
from tests.e2e.serving import ACAGPU, background_server

RECORD_SCALE = "0.004"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | {"NO_COLOR": "1"}


def _run(args: list[str], env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([*ACAGPU, *args], env=env, capture_output=True, text=True, timeout=180)
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, doc, proc.stderr


def _verdict(doc: dict[str, Any]) -> tuple[Any, ...]:
    explorer = doc["explorer"]
    return doc["status"], explorer["driver_version"], explorer["cuda_version"], explorer["gpus"][0]["name"]


def test_a_recorded_up_replays_and_holds_no_secret(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    code, recorded, err = _run(
        ["up", "--emulator", "--time-scale", RECORD_SCALE, "--record", str(folder), "-o", "json"],
        _clean_env(),
    )
    assert code == 0, err
    text = (folder / RECORDING_FILE).read_text(encoding="utf-8")
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    assert meta["command"] == "up" and meta["exit_code"] == 0 and meta["exchanges"] == len(text.splitlines())
    # what it recorded: ARM, and the log streams of the probe job (nvidia-smi's table) and the tester
    methods = {json.loads(line)["method"] for line in text.splitlines()}
    assert {"GET", "PUT", "POST", "DELETE"} <= methods
    assert "/logstream?" in text and "Driver Version" in text and "ACAGPU_SMI_TABLE_EXIT=" in text
    # and what it must not: the emulator's subscription, any token, any GUID or address of a person
    assert SUBSCRIPTION not in text and "eyJ" not in text
    assert all(re.fullmatch(r"00000000-0000-4000-8000-\d{12}", g) for g in GUID.findall(text))
    assert all(e.endswith("@example.com") for e in EMAIL.findall(text))

    env_file = tmp_path / "replay.env"
    with background_server(["emulator", "replay", str(folder)], env_file, env=_clean_env()) as (
        replay,
        server,
    ):
        shell = _clean_env() | replay
        code, replayed, err = _run(["up", "--yes", "-o", "json"], shell)
        assert code == 0, err
        assert _verdict(replayed) == _verdict(recorded)
        assert replayed["run_id"] != recorded["run_id"]  # a new run id, learned by the replay
        status_url = replay["ACAGPU_ARM_ENDPOINT"] + "/_replay/status"
        report = requests.get(status_url, verify=replay["ACAGPU_CA_BUNDLE"], timeout=10).json()
        assert report["ok"] is True and report["mismatches"] == [] and report["unused_writes"] == []
        assert report["served"] >= report["recorded"] - report["unused_reads"]

        # strict: a run the recording does not have (another GPU) is refused, and the verdict says so
        code, _, _ = _run(["up", "--yes", "--gpu", "a100", "-o", "json"], shell)
        assert code != 0
        report = requests.get(status_url, verify=replay["ACAGPU_CA_BUNDLE"], timeout=10).json()
        assert report["ok"] is False and report["mismatches"]
    assert server.returncode == 1  # the replay diverged (the second run), and the server's exit says so


IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SECRET_VALUE = "hfZq8xV3kP9mN2wT7"  # what a user's token looks like: no key=value around it to give it away


def _encodings(value: str) -> set[str]:
    """The forms a value takes on its way through HTTP and JSON: as is, URL-quoted, base64, hex."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), raw.hex()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode().rstrip("="))
    return forms


def _record_run(folder: Path, value: str) -> dict[str, Any]:
    """`acagpu run --secret-env MY_TOKEN --record folder` on the embedded emulator; the container
    prints the value bare (no `token=` beside it that the sanitizer's patterns would catch)."""
    code, doc, err = _run(
        ["run", "--emulator", "--time-scale", RECORD_SCALE, "--record", str(folder), "--yes", "-o", "json",
         "--secret-env", "MY_TOKEN", IMAGE, "sh", "-c", "echo seen $MY_TOKEN"],
        _clean_env() | {"MY_TOKEN": value},
    )  # fmt: skip
    assert code == 0, err
    return doc


def _leaks(folder: Path, value: str) -> list[str]:
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    assert {p.name for p in files} >= {RECORDING_FILE, META_FILE}
    texts = {p.name: p.read_bytes().decode("utf-8", "replace") for p in files}
    return [f"{name}: {form}" for name, text in texts.items() for form in _encodings(value) if form in text]


def test_a_recorded_run_never_writes_its_secret_value(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    doc = _record_run(folder, SECRET_VALUE)
    # the value really travelled: into the job, through the container, back in its log stream
    # (where the recording has its placeholder, below), and acagpu showed it masked
    assert doc["output"]["stdout"] == "seen ***\n" and doc["workload"]["secret_env"] == ["MY_TOKEN"]
    assert not _leaks(folder, SECRET_VALUE)
    text = (folder / RECORDING_FILE).read_text(encoding="utf-8")
    placeholder = re.search(r'"name": "env-my-token", "value": "(<secret-\d+>)"', text)
    assert placeholder is not None  # the job PUT's secret, replaced ...
    assert f"stdout F seen {placeholder.group(1)}" in text  # ... and the same placeholder in the log line
    assert json.loads((folder / META_FILE).read_text(encoding="utf-8"))["argv"][-1] == "echo seen $MY_TOKEN"


def test_a_short_secret_value_is_not_written_either(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _record_run(folder, "ab1Z9")
    assert not _leaks(folder, "ab1Z9")
