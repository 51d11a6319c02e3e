"""A POST whose answer a connection reset took away: registering a provider and starting a kept
explorer are idempotent, so acagpu sends them again (or reads the state) instead of failing.

Real processes: `acagpu emulator serve`, the chaos proxy in front (a `reset` after forwarding: the
emulator did the work, acagpu never heard), and the CLI as a subprocess.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import requests

from tests.chaos.proxy import ChaosProxy
from tests.e2e.serving import emulator_get, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def _fired(proxy: ChaosProxy) -> list[str]:
    answer = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=10)
    events = answer.json()["events"]
    return [f"{e['fault']} {e['method']} {e['path']}" for e in events]


def test_a_reset_after_register_and_after_an_explorer_start_is_not_a_failure(tmp_path: Path) -> None:
    with serve_behind_proxy(tmp_path, extra=("--unregistered",)) as (
        _emu,
        proxy,
        shell,
    ):  # a fresh subscription
        reset = {"fault": "reset", "method": "POST", "when": "after", "count": 1}
        proxy.set_rules({"rules": [{**reset, "path": "providers/Microsoft.App/register"}]})
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode in (0, 7), made.stderr + str(proxy.traffic[-3:])
        assert any("register" in f for f in _fired(proxy)), _fired(proxy)  # the fault met its request
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)["state"] == "idle"

        kept = _acagpu(shell, "up", "--keep", "--yes", "--run-id", "keepme", "-o", "json")
        assert kept.returncode == 0, kept.stderr
        proxy.set_rules({"rules": [{**reset, "path": "containerApps/cuda-explorer-keepme[^/]*/start"}]})
        smi = _acagpu(shell, "smi", "--run-id", "keepme", "-o", "json")
        assert [f for f in _fired(proxy) if "/start" in f], _fired(proxy)
        assert smi.returncode == 0, smi.stderr
        assert json.loads(smi.stdout)["gpus"], smi.stdout
        down = _acagpu(shell, "down", "--run-id", "keepme", "--yes")
        assert down.returncode == 0, down.stderr


def test_a_lost_start_answer_of_the_probe_and_the_tester_is_found_by_its_token(tmp_path: Path) -> None:
    """Every execution acagpu starts carries a token (`ACAGPU_ATTEMPT_ID`) in its template's env,
    the probe and the tester of a warm run as every shard: a start whose answer was lost is found by
    it, never started twice, and no start is told by listing the job's executions before and after."""
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        reset = {"fault": "reset", "method": "POST", "when": "after", "count": 1}
        proxy.set_rules(
            {
                "rules": [
                    {**reset, "path": "jobs/cuda-probe-[^/]*/start"},
                    {**reset, "path": "jobs/gpu-tester-[^/]*/start"},
                ]
            }
        )
        traffic_from = len(proxy.traffic)
        up = _acagpu(shell, "up", "--env", "lab", "--yes", "--run-id", "tok123", "-o", "json")
        assert up.returncode == 0, up.stderr
        assert len([f for f in _fired(proxy) if f.endswith("/start")]) == 2, _fired(proxy)
        sent = proxy.traffic[traffic_from:]
        starts = [t for t in sent if t["method"] == "POST" and t["path"].endswith("/start")]
        assert len(starts) == 2, [t["path"] for t in starts]  # each sent once: found, not sent again
        for start in starts:
            env = {e["name"]: e.get("value") for e in json.loads(start["body"])["containers"][0]["env"]}
            assert re.fullmatch(r"[0-9a-f]{16}", env.get("ACAGPU_ATTEMPT_ID") or ""), start["body"]
        listings = [t for t in sent if t["method"] == "GET" and t["path"].endswith("/executions")]
        assert listings, "a lost answer is looked up by its token in the job's executions"
        billed = emulator_get(emu, "billing")["replicas"]
        mine = [r for r in billed if "tok123" in str(r["resource"])]
        assert sorted(r["resource"].rsplit("/", 1)[-1] for r in mine) == [
            "cuda-probe-tok123", "gpu-tester-tok123"
        ], mine  # fmt: skip


def test_a_run_with_a_mount_runs_its_jobs_own_template_and_is_found_by_its_token(tmp_path: Path) -> None:
    """The spec's execution template has no `volumeMounts`: a `run --mount` starts its job's own
    template (which has them), and the token that finds a start whose answer was lost is in it."""
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {"rules": [{"fault": "reset", "method": "POST", "when": "after", "count": 1,
                        "path": "jobs/run-mnt123/start"}]}
        )  # fmt: skip
        traffic_from = len(proxy.traffic)
        wrote = _acagpu(shell, "run", "--env", "lab", "--yes", "--run-id", "mnt123", "--max-minutes", "600",
                        "--mount", "data:/data", "--create-share", "nvidia/cuda:12.4.1-base-ubuntu22.04",
                        "--", "sh", "-c", "echo hi-from-the-share > /data/x")  # fmt: skip
        assert wrote.returncode == 0, wrote.stderr
        assert [f for f in _fired(proxy) if f.endswith("/start")], _fired(proxy)
        sent = proxy.traffic[traffic_from:]
        starts = [t for t in sent if t["method"] == "POST" and t["path"].endswith("/jobs/run-mnt123/start")]
        assert len(starts) == 1 and "volumeMounts" not in starts[0]["body"], starts  # the job's template
        (made_job,) = [t for t in sent if t["method"] == "PUT" and t["path"].endswith("/jobs/run-mnt123")]
        container = json.loads(made_job["body"])["properties"]["template"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert re.fullmatch(r"[0-9a-f]{16}", env.get("ACAGPU_ATTEMPT_ID") or ""), container
        assert container["volumeMounts"], container
        read = _acagpu(shell, "run", "--env", "lab", "--yes", "--max-minutes", "600", "--mount", "data:/in",
                       "nvidia/cuda:12.4.1-base-ubuntu22.04", "--", "sh", "-c", "cat /in/x")  # fmt: skip
        assert read.returncode == 0, read.stderr
        assert "hi-from-the-share" in read.stdout + read.stderr, read.stdout + read.stderr
