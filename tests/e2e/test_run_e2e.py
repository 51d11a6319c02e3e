"""`acagpu run` against `acagpu emulator serve` in a second shell, through the fault proxy.

The emulator runs the job's command for real in Podman (the test image is in its local storage),
so the output, the exit code and the secret's arrival are the container's own. The proxy keeps
every request and answer body: the secret may appear in the job's PUT (its secrets list) only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.serving import serve_behind_proxy
from tests.local.conftest import podman, test_image  # noqa: F401  (fixtures)

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SECRET = "s3cr3t-v4lue-1"  # 14 characters: the container checks its length, never prints it


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _secret_only_in_the_job_put(traffic: list[dict[str, Any]]) -> int:
    """Every body holding the secret is a job PUT whose only copy is in configuration.secrets."""
    found = 0
    for entry in traffic:
        assert SECRET not in entry["answer"], f"answered back by {entry['method']} {entry['path']}"
        if SECRET not in entry["body"]:
            continue
        assert entry["method"] == "PUT" and "/jobs/" in entry["path"], entry["path"]
        body = json.loads(entry["body"])
        config = body["properties"]["configuration"]
        assert [s["value"] for s in config.pop("secrets")] == [SECRET]
        assert SECRET not in json.dumps(body)  # not in env, tags, or anywhere else of the body
        found += 1
    return found


@pytest.mark.slow(28)
def test_run_prints_both_streams_exits_with_the_code_and_leaves_nothing(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        shell["TOKEN"] = SECRET
        plain = _acagpu(shell, "run", "--yes", test_image, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
        assert plain.returncode == 3, plain.stderr
        assert plain.stdout == "out\n" and "err\n" in plain.stderr

        # the log stream is cut mid-line once: the reconnect's replay must not double a line
        proxy.set_rules({"rules": [{"fault": "stream_cut", "path": "logstream", "after_lines": 2}]})
        script = "for i in 1 2 3; do echo out; done; echo err >&2; [ ${#TOKEN} -eq 14 ] || exit 9; exit 3"
        done = _acagpu(shell, "run", "--yes", "-o", "json", "--secret-env", "TOKEN", "-e", "A=1",
                       test_image, "--", "sh", "-c", script)  # fmt: skip
        assert done.returncode == 3, done.stderr
        doc = json.loads(done.stdout)
        assert (doc["status"], doc["exit_code"], doc["exit_code_from"]) == (
            "container_failed",
            3,
            "container",
        )
        assert (doc["output"]["stdout"], doc["output"]["stderr"]) == ("out\nout\nout\n", "err\n")
        assert doc["teardown"]["billing_stopped"] is True and doc["runtime"] == "aca"
        assert [e["fault"] for e in requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle,
                                                 timeout=10).json()["events"]] == ["stream_cut"]  # fmt: skip
        assert SECRET not in done.stdout + done.stderr + plain.stdout + plain.stderr
        assert _secret_only_in_the_job_put(proxy.traffic) == 1

        # --max-minutes: the platform ends the execution at its replica timeout; exit 4, said so
        slow = _acagpu(shell, "run", "--yes", "-o", "json", "--max-minutes", "1", test_image, "--",
                       "sh", "-c", "echo started; sleep 60")  # fmt: skip
        assert slow.returncode == 4, slow.stderr
        late = json.loads(slow.stdout)
        assert (late["status"], late["exit_code_from"], late["container"]["status"]) == (
            "timed_out", "acagpu", "timeout"
        )  # fmt: skip
        assert "--max-minutes 1" in late["error"]["message"] and late["teardown"]["billing_stopped"]

        # --env: inside a warm environment only the run's job comes and goes
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        # an Azure Files share of the environment, mounted by one run and read by the next
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
        warm = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--mount", "datasets:/data",
                       test_image, "--", "sh", "-c", "echo warm; echo warm > /data/kept.txt")  # fmt: skip
        assert warm.returncode == 0, warm.stderr
        script = "read kept < /in/kept.txt; echo $kept"
        again = _acagpu(shell, "run", "--env", "lab", "--yes", "--mount", "datasets:/in", test_image, "--",
                        "sh", "-c", script)  # fmt: skip
        assert (again.returncode, again.stdout) == (0, "warm\n"), again.stderr
        assert "files in /in are in environment storage datasets" in again.stderr
        inside = json.loads(warm.stdout)
        assert (inside["env"], inside["output"]["stdout"], inside["teardown"]["billing_stopped"]) == (
            "lab",
            "warm\n",
            True,
        )  # the run's own group is deleting: billing stopped, the warm environment untouched
        assert inside["resources"]["environment_group"] == "rg-acagpu-env-lab"
        assert inside["resources"]["resource_group"] == f"rg-acagpu-{inside['run_id']}"
        kept = _acagpu(shell, "env", "show", "lab", "-o", "json")
        assert kept.returncode == 0 and json.loads(kept.stdout)["state"] == "idle", kept.stdout

        # nothing of the runs is left once their groups' deletes end: only the warm environment
        deadline, inventory = time.monotonic() + 60, {}
        while time.monotonic() < deadline:
            inventory = requests.get(
                f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/inventory",
                headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
                verify=emu["ACAGPU_CA_BUNDLE"],
                timeout=30,
            ).json()
            assert not inventory["jobs"] and not inventory["replicas"], inventory  # billing stopped at once
            if [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]:
                break
            time.sleep(0.2)
        assert [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]  # only the warm one
    left = subprocess.run(
        [podman, "ps", "-a", "-q", "--filter", f"name=acagpu-emu-{emu['ACAGPU_EMULATOR_PID']}-"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == ""  # the timed-out container was removed with its replica


def test_ctrl_c_stops_the_run_tears_down_and_exits_130() -> None:
    """A `sh -c` line runs for real in the emulator's sandbox; Ctrl-C while it runs."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--emulator", "--time-scale", "0.002", "--yes", "--run-id", "ctrlc2",
         "busybox", "--", "sh", "-c", "echo started; sleep 60"],
        env=shell,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"  # live, while the container runs
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == ""  # nothing more from the container after it was stopped
    assert "error: interrupted: run ctrlc2 stopped" in err
    assert any(" teardown " in line and line.endswith("deleting") for line in err.splitlines()), err


def test_a_second_ctrl_c_during_teardown_leaves_the_run_and_prints_its_removal() -> None:
    shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--emulator", "--time-scale", "0.005", "--yes", "--run-id", "ctrlc3",
         "busybox", "--", "sh", "-c", "echo started; sleep 60"],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    said = ""
    while "Ctrl-C again to leave it" not in said:  # the first one tears down, and says so
        line = proc.stderr.readline()
        assert line, said
        said += line
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "remove it with: acagpu down --run-id ctrlc3" in err and "hint: acagpu down --run-id ctrlc3" in err
