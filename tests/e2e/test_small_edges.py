"""Smaller promises of the walkthrough, checked with real processes against `acagpu emulator serve`:
a bad `--gpu` has a machine-readable error code in every command that takes one; `logs --system`
prints one timestamp format, in time order; a warm run's teardown waits no fixed seconds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with emulator_serve(tmp_path_factory.mktemp("emu") / "emu.env") as emu:
        env = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG"):
            env.pop(key, None)
        yield env


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ("up", "--gpu", "h999", "--dry-run"),
        ("run", "--gpu", "h999", "--dry-run", "-o", "json", "img", "--", "true"),
        ("env", "create", "x", "--gpu", "h999", "--yes"),
        ("check", "--gpu", "h999"),
    ],
)
def test_a_bad_gpu_has_an_error_code(shell: dict[str, str], args: tuple[str, ...]) -> None:
    done = _acagpu(shell, *args, *(() if "json" in args else ("-o", "json")))
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "UnknownGpuProfile" and "h999" in error["message"], error
    assert error["hint"], error


def test_system_events_have_one_timestamp_format_in_time_order(shell: dict[str, str]) -> None:
    kept = _acagpu(shell, "up", "--keep", "--yes", "--run-id", "evts")
    assert kept.returncode == 0, kept.stderr
    try:
        for source in ((), ("--tester",)):
            done = _acagpu(shell, "logs", "--run-id", "evts", "--system", *source, "-o", "json")
            assert done.returncode == 0, done.stderr
            stamps = [e["TimeStamp"] for e in json.loads(done.stdout)["events"]]
            assert len(stamps) > 3, stamps
            assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", s) for s in stamps), stamps
            assert stamps == sorted(stamps), stamps
    finally:
        _acagpu(shell, "down", "--run-id", "evts", "--yes")


def test_a_warm_runs_teardown_waits_no_fixed_poll(shell: dict[str, str]) -> None:
    made = _acagpu(shell, "env", "create", "quick", "-l", "eastus", "--gpu", "t4", "--yes")
    assert made.returncode == 0, made.stderr
    user = {k: v for k, v in shell.items() if k != "ACAGPU_POLLING_INTERVAL"}  # the default 5 s
    image = "nvidia/cuda:12.4.1-base-ubuntu22.04"
    done = _acagpu(user, "run", "--yes", "--env", "quick", "-o", "json", image, "--", "sh", "-c", "echo hi")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # the platform deletes the run's job in well under a second here: teardown must not wait a poll
    assert doc["phases"]["teardown"] < 2.5, doc["phases"]
    assert doc["teardown"]["billing_stopped"] is True
