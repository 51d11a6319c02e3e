"""A shell whose emulator is gone, or that never sourced its env file: the error says that, at once.

`emulator stopped` gave 30 s of silent retries and an error with no hint; `env file not sourced`
gave only `az login`."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import certifi
from click.testing import CliRunner

from aca_gpu.cli import cli


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on leaving: nothing listens there


def test_a_stopped_emulator_is_said_at_once_with_how_to_start_it_again() -> None:
    env = {
        "ACAGPU_ARM_ENDPOINT": f"https://127.0.0.1:{_dead_port()}",
        "ACAGPU_CA_BUNDLE": certifi.where(),
        "ACAGPU_TOKEN": "x",
        "ACAGPU_SUBSCRIPTION": "00000000-0000-0000-0000-000000000001",
    }
    began = time.monotonic()
    result = CliRunner().invoke(cli, ["status", "-o", "json"], env=env)
    assert time.monotonic() - began < 10, "no retries for a port nothing listens on"
    error = json.loads(result.stdout)["error"]
    assert (result.exit_code, error["code"]) == (7, "EmulatorNotRunning"), result.output
    assert "acagpu emulator serve --env-file" in error["hint"], error


def test_without_the_env_file_the_hint_names_it_beside_az_login(tmp_path: Path) -> None:
    env = {k: None for k in ("ACAGPU_ARM_ENDPOINT", "ACAGPU_CA_BUNDLE", "ACAGPU_TOKEN", "ACAGPU_SUBSCRIPTION",
                             "AZURE_SUBSCRIPTION_ID", "ACAGPU_ENV")}  # fmt: skip
    result = CliRunner().invoke(cli, ["status", "-o", "json"], env={**env, "HOME": str(tmp_path), "PATH": ""})
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "NoSubscription" and "source the env file" in error["hint"], error
