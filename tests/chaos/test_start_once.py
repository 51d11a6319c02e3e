"""A start never runs twice, Ctrl-C while starts are in flight ends the run promptly, and the
Log Analytics workspace step of `env create` (and of every cold run) rides out faults.

Jobs_Start is not idempotent. A 503 after ARM accepted the start used to be resent by azure-core's
retry policy before acagpu looked for the execution by its token (two containers, one attempt in
the document); a gateway that delivers the POST twice makes two executions with one token, the
older listed after the newer. Real processes: `acagpu emulator serve`, the chaos proxy in front
(`status` after forwarding: the emulator started it, acagpu heard 503; `duplicate`: sent upstream
twice), and the CLI as a subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.chaos.proxy import ChaosProxy
from tests.e2e.serving import emulator_get, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
START = "jobs/[^/]*/start"
WORKSPACE = "workspaces/log-cae-acagpu-env-lab"


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def _events(proxy: ChaosProxy) -> list[dict[str, Any]]:
    answer = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=10)
    found: list[dict[str, Any]] = answer.json()["events"]
    return found


def _billed(emu: dict[str, str], run_id: str) -> dict[str, dict[str, Any]]:
    """execution -> its replica's bill, for the run's jobs."""
    rows = emulator_get(emu, "billing")["replicas"]
    return {r["parent"]: r for r in rows if r.get("run_id") == run_id}


@pytest.mark.slow(12)  # an emulator, the environment, a fan-out and a run: four processes
def test_a_start_answered_503_or_delivered_twice_runs_once_and_a_copy_is_stopped_and_named(
    tmp_path: Path,
) -> None:
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {
                "rules": [
                    {"fault": "duplicate", "method": "POST", "path": START, "count": 1},
                    {"fault": "status", "status": 503, "when": "after", "method": "POST", "path": START},
                ]
            }
        )
        script = "echo shard $ACAGPU_SHARD_INDEX; sleep 2"
        fan = _acagpu(shell, "run", "--env", "lab", "--yes", "--shards", "2", "--run-id", "once1",
                      "-o", "json", IMAGE, "--", "sh", "-c", script)  # fmt: skip
        assert fan.returncode == 0, fan.stderr
        assert sorted(e["fault"] for e in _events(proxy)) == ["duplicate", "status"], _events(proxy)
        billed = _billed(emu, "once1")
        # the 503'd start was looked for by its token, not sent again: the gateway's copy is the
        # only execution beyond the two shards'
        assert len(billed) == 3, billed
        doc = json.loads(fan.stdout)
        attempts = [a for shard in doc["shards"] for a in shard["attempts"]]
        assert len(attempts) == 2, attempts  # one attempt a shard: neither fault is the shard's
        extras = [e for a in attempts for e in a["extra_executions"]]
        assert len(extras) == 1, attempts  # the gateway's copy, named in its shard's attempt
        assert sorted(billed) == sorted([a["execution"] for a in attempts] + extras), billed
        assert billed[extras[0]]["wall_seconds"] < 1.5, billed[extras[0]]  # stopped, not run to its end

        fired = len(_events(proxy))
        proxy.set_rules(
            {"rules": [{"fault": "status", "status": 500, "when": "after", "method": "POST", "path": START}]}
        )
        one = _acagpu(shell, "run", "--env", "lab", "--yes", "--run-id", "once2", "-o", "json",
                      IMAGE, "--", "sh", "-c", "echo single")  # fmt: skip
        assert one.returncode == 0, one.stderr
        assert [e.get("status") for e in _events(proxy)[fired:]] == [500], _events(proxy)
        assert len(_billed(emu, "once2")) == 1, _billed(emu, "once2")


@pytest.mark.slow(10)  # an emulator, the environment, a fan-out held in a 429 storm
def test_the_workspace_step_rides_out_faults_and_ctrl_c_in_a_429_storm_on_starts_exits_at_once(
    tmp_path: Path,
) -> None:
    """`env create`'s Log Analytics workspace step meets a reset after its PUT, a 404 right after
    its create, a 502 and then a cut answer on its shared-keys POST (a safe read): none ends the
    command (0.4: exit 2 "not found", or 7). Then every start is refused for ARM's rate (a lasting
    storm) and Ctrl-C comes: the shards whose starts were in flight are cancelled, not failed (none
    in `failed_indexes`), and the process exits with 130 right after its document, its job gone."""
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        proxy.set_rules(
            {
                "rules": [
                    {"fault": "not_found_after_put", "method": "PUT", "path": WORKSPACE + "$", "gets": 2},
                    {"fault": "reset", "when": "after", "method": "PUT", "path": WORKSPACE + "$"},
                    {"fault": "status", "status": 502, "method": "POST", "path": WORKSPACE + "/sharedKeys"},
                    {"fault": "truncate", "method": "POST", "path": WORKSPACE + "/sharedKeys"},
                ]
            }
        )
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        fired = sorted({(e["fault"], e["method"]) for e in _events(proxy)})
        assert fired == [("not_found_after_put", "GET"), ("not_found_after_put", "PUT"), ("reset", "PUT"),
                         ("status", "POST"), ("truncate", "POST")], _events(proxy)  # fmt: skip
        assert json.loads(made.stdout)["state"] == "idle", made.stdout

        storm = {"fault": "throttle", "method": "POST", "path": START, "count": 0, "retry_after": 1}
        proxy.set_rules({"rules": [storm]})
        proc = subprocess.Popen(
            [*ACAGPU, "run", "--env", "lab", "--yes", "--shards", "3", "--run-id", "storm1", "-o", "json",
             IMAGE, "--", "sh", "-c", "echo never"],
            env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            before = len(_events(proxy))
            while time.monotonic() < deadline and len(_events(proxy)) < before + 3 and proc.poll() is None:
                time.sleep(0.1)
            assert len(_events(proxy)) >= before + 3, "the starts never met the storm"
            proc.send_signal(signal.SIGINT)
            asked = time.monotonic()
            out, err = proc.communicate(timeout=40)
            took = time.monotonic() - asked
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, err
        assert took < 20, f"{took:.1f} s from Ctrl-C to the exit"
        doc = json.loads(out)
        assert doc["summary"]["failed_indexes"] == [], doc["summary"]
        assert {s["status"] for s in doc["shards"]} == {"cancelled"}, doc["shards"]
        assert not [j for j in emulator_get(emu, "inventory")["jobs"] if "storm1" in json.dumps(j)]
