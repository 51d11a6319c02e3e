"""A served app's replica in Podman: the emulator runs its image for real (here an image of this
machine's Python with a stand-in model server), publishes its port on loopback and its ingress
forwards there. Two apps whose containers both listen on 8000 answer side by side, each in its own
network as on ACA; `down` removes their containers."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.server import EmulatorServer


@pytest.fixture
def emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=0.01, registered=True, workdir=tmp_path / "emu") as server:
        for key, value in server.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.05")
        monkeypatch.delenv("ACAGPU_CONFIG", raising=False)
        yield server


def acagpu(*args: str) -> dict[str, Any]:
    """The command's JSON document (`-o json` right after `serve`: what follows its IMAGE is the
    container's command)."""
    argv = [args[0], "-o", "json", *args[1:]] if args[0] == "serve" else [*args, "-o", "json"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_served_apps_run_in_podman_on_one_port_side_by_side(
    emulator: EmulatorServer, podman: str, python_image: str
) -> None:
    acagpu("env", "create", "lab", "--yes")
    command = ("--", "python3", "/srv/standin.py", "8000")
    served = {
        run_id: acagpu(
            "serve",
            "--env",
            "lab",
            "--run-id",
            run_id,
            "--port",
            "8000",
            # one replica kept: at this test's time scale the idle cooldown is a few real seconds,
            # shorter than the second app's cold start on a busy machine
            "--min-replicas",
            "1",
            "--yes",
            python_image,
            *command,
        )
        for run_id in ("pd1", "pd2")
    }
    for run_id, doc in served.items():
        assert doc["status"] == "serving" and doc["first_answer"]["status"] == 200, doc
        answer = requests.get(doc["url"] + "/", timeout=30)
        replicas = [
            r["name"][:63]
            for r in emulator.inventory()["replicas"]
            if r["owner"] == f"serve-{run_id}" and r["phase"] != "Terminated"
        ]
        # the container's hostname is its replica's name, as on ACA
        assert answer.status_code == 200 and replicas == [answer.text], (answer.text, replicas)
    mine = f"name=acagpu-emu-{os.getpid()}-"
    running = subprocess.run([podman, "ps", "-q", "--filter", mine], capture_output=True, text=True)
    assert len(running.stdout.split()) == 2  # one container per app
    for run_id in served:
        acagpu("down", "--run-id", run_id, "--yes")
    left = subprocess.run([podman, "ps", "-a", "-q", "--filter", mine], capture_output=True, text=True)
    assert left.stdout.strip() == ""
