"""Several subscriptions against `acagpu emulator serve --subscriptions 3` in a second shell: every
served subscription's data plane (exec, the log stream, a served app's ingress) opens with its own
tokens, so `up`, `run` and `serve` work outside the first one; a refused websocket is one clear line;
`--all-subscriptions` tables show each subscription whole; `down` of a run that is in another
subscription says where it is instead of calling it absent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import requests

from aca_gpu.emulator.server import subscription_ids
from tests.e2e.serving import ACAGPU, emulator_serve, free_port

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
FIRST, SECOND, THIRD = subscription_ids(3)


def _shell(emu: dict[str, str]) -> dict[str, str]:
    shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    return shell | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "NO_COLOR": "1", "COLUMNS": "200"}


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def test_up_exec_and_run_work_in_the_second_and_third_subscription(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", extra=("--subscriptions", "3")) as emu:
        shell = _shell(emu)
        up = _acagpu(shell, "up", "--yes", "--keep", "--subscription", SECOND, "-o", "json")
        assert up.returncode == 0, up.stderr
        doc = json.loads(up.stdout)
        assert doc["status"] == "ok" and doc["explorer"]["gpus"], doc
        run_id = doc["run_id"]
        # the command that removes it names its subscription (a bare `down` here would look in the first)
        assert doc["delete"] == f"acagpu down --run-id {run_id} --subscription {SECOND} --yes", doc["delete"]
        # the kept explorer's exec socket, in the second subscription
        hello = _acagpu(
            shell, "exec", "--subscription", SECOND, "--run-id", run_id, "--", "echo", "hi-second"
        )
        assert (hello.returncode, hello.stdout) == (0, "hi-second\n"), hello.stderr
        ran = _acagpu(shell, "run", "--yes", "--subscription", THIRD, IMAGE, "--", "sh", "-c",
                      "echo from-the-third; echo on-stderr >&2")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines()[0] == "from-the-third" and "on-stderr" in ran.stderr

        # the tables across subscriptions name each subscription whole
        status = _acagpu(shell, "status", "--all-subscriptions")
        assert status.returncode == 0, status.stderr
        assert f"subscription {SECOND}" in status.stdout.splitlines() and run_id in status.stdout
        reap = _acagpu(shell, "reap", "--all-subscriptions")
        assert reap.returncode == 0, reap.stderr
        assert f"subscription {SECOND}" in reap.stdout.splitlines(), reap.stdout
        assert f"rg-acagpu-{run_id}" in reap.stdout
        cost = _acagpu(shell, "cost", "--subscription", SECOND, "--subscription", THIRD, "--run-id", run_id)
        assert cost.returncode == 0, cost.stderr
        assert f"subscription {SECOND}" in cost.stdout.splitlines() and run_id in cost.stdout, cost.stdout
        every = _acagpu(shell, "cost", "--all-subscriptions", "--run-id", run_id)  # through Resource Graph
        assert every.returncode == 0, every.stderr
        assert f"subscription {SECOND}" in every.stdout.splitlines() and run_id in every.stdout, every.stdout
        down = _acagpu(shell, "down", "--yes", "--subscription", SECOND, "--run-id", run_id)
        assert down.returncode == 0, down.stderr


def test_serve_in_the_third_subscription_and_a_down_that_names_where_the_run_is(tmp_path: Path) -> None:
    """Before, `down --run-id` (the command serve prints) in the default subscription answered
    "absent (nothing to delete)", exit 0, while the app in the third one went on billing."""
    port = str(free_port())
    with emulator_serve(tmp_path / "emu.env", extra=("--subscriptions", "3")) as emu:
        shell = _shell(emu)
        model = ("python:3.12-slim", "--", "python3", "-m", "http.server", port)
        served = _acagpu(
            shell,
            "serve",
            "-o",
            "json",
            "--yes",
            "--subscription",
            THIRD,
            "--run-id",
            "sub3",
            "--port",
            port,
            "--min-replicas",  # kept warm: at this speed the idle cooldown is 0.6 wall s
            "1",
            *model,
        )
        assert served.returncode == 0, served.stderr
        doc = json.loads(served.stdout)
        assert doc["delete"] == f"acagpu down --run-id sub3 --subscription {THIRD} --yes", doc["delete"]
        answer = requests.get(doc["url"] + "/", timeout=30, verify=emu["ACAGPU_CA_BUNDLE"])
        assert answer.status_code == 200 and "Directory listing" in answer.text, answer.text[:200]
        status = _acagpu(shell, "status", "--all-subscriptions")
        assert f"subscription {THIRD}" in status.stdout.splitlines(), status.stdout
        assert "serving (1 replica)" in status.stdout, status.stdout

        refused = _acagpu(shell, "down", "--yes", "--run-id", "sub3")  # the default subscription
        assert refused.returncode == 2, refused.stderr
        assert f"run sub3 is not in subscription {FIRST} but in {THIRD}: it was not deleted" in refused.stderr
        assert f"hint: acagpu down --run-id sub3 --subscription {THIRD} --yes" in refused.stderr
        absent = _acagpu(shell, "down", "--yes", "--run-id", "nowhere")  # CI's cleanup stays idempotent
        assert absent.returncode == 0 and "absent (nothing to delete)" in absent.stdout, absent.stderr

        down = _acagpu(shell, "down", "--yes", "--run-id", "sub3", "--subscription", THIRD)
        assert down.returncode == 0 and "gone (verified)" in down.stdout, down.stderr
        left = _acagpu(shell, "status", "--all-subscriptions", "-o", "json")
        assert "sub3" not in left.stdout, left.stdout


def test_a_refused_exec_is_one_line_without_headers(tmp_path: Path) -> None:
    """The exec handshake refused (503 through the fault proxy): exit 7, one line, no raw answer."""
    from tests.chaos.proxy import ChaosProxy

    with (
        emulator_serve(tmp_path / "emu.env", extra=("--subscriptions", "3")) as emu,
        ChaosProxy(emu["ACAGPU_ARM_ENDPOINT"], emu["ACAGPU_CA_BUNDLE"], workdir=tmp_path / "proxy") as proxy,
    ):
        shell = _shell(emu) | {"ACAGPU_ARM_ENDPOINT": proxy.endpoint, "ACAGPU_CA_BUNDLE": proxy.ca_bundle}
        up = _acagpu(shell, "up", "--yes", "--keep", "--subscription", SECOND, "-o", "json")
        assert up.returncode == 0, up.stderr
        run_id = json.loads(up.stdout)["run_id"]
        proxy.set_rules({"rules": [{"fault": "status", "path": r"/exec$", "count": 0, "status": 503}]})
        refused = _acagpu(shell, "exec", "--subscription", SECOND, "--run-id", run_id, "--", "true")
        assert refused.returncode == 7, refused.stderr
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "HTTP 503: ServiceUnavailable: Please retry later." in errors[0], errors
        assert "wss://" not in errors[0] and len(errors[0]) < 300, errors  # the host, not the replica's URL
        assert not [raw for raw in ("-+-+-", "content-type", "b'", "handshake status")
                    if raw in refused.stderr.lower()]  # fmt: skip
        proxy.set_rules({"rules": []})
        down = _acagpu(shell, "down", "--yes", "--subscription", SECOND, "--run-id", run_id)
        assert down.returncode == 0, down.stderr
