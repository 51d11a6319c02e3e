"""`acagpu run --env` where the warm environment does not hold what the run needs, or goes away
while the run is inside it: real processes (`emulator serve`, through the fault proxy, and the CLI).

- A `--mount` naming a storage the environment lacks is bad input found before anything exists:
  exit 2, no group created (the proxy's traffic holds no PUT of one), and no line saying the files
  are in that storage.
- `env delete --force` while a run's container runs: the run notices its job is gone (404) within
  seconds, says so in its own words (never "tester"), and counts no GPU-second past the deletion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.serving import emulator_serve, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SLEEPER = "echo started; sleep 60; echo ended"


def _acagpu(shell: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def test_a_mount_of_a_missing_storage_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        before = len(proxy.traffic)
        refused = _acagpu(shell, "run", "--yes", "--env", "lab", "--mount", "nope:/in", IMAGE, "--",
                          "cat", "/in/x")  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert "has no storage nope" in refused.stderr
        assert "are in environment storage nope" not in refused.stderr  # no output went there
        writes = [
            f"{e['method']} {e['path']}"
            for e in proxy.traffic[before:]
            if e["method"] in ("PUT", "PATCH", "POST", "DELETE") and "/_" not in e["path"]
        ]
        assert not [w for w in writes if "resourcegroups/rg-acagpu-" in w.lower()], writes

        as_json = _acagpu(shell, "run", "--yes", "--env", "lab", "--mount", "nope:/in", "-o", "json",
                          IMAGE, "--", "cat", "/in/x")  # fmt: skip
        doc = json.loads(as_json.stdout)
        assert (as_json.returncode, doc["error"]["code"]) == (2, "StorageNotFound"), as_json.stdout
        assert doc["teardown"]["status"] == "nothing-created", doc["teardown"]


@pytest.mark.slow(25)
def test_a_run_whose_environment_is_force_deleted_says_its_job_is_gone_and_stops_counting(
    tmp_path: Path,
) -> None:
    # 0.05: the default --max-minutes (30) is 90 wall seconds, longer than the container's sleep
    with emulator_serve(tmp_path / "emu.env", time_scale=0.05) as emu:
        shell = {**os.environ, **emu, "ACAGPU_POLLING_INTERVAL": "0.1"}
        shell.pop("ACAGPU_ENV", None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        # the platform's deadline is the container's, in acagpu run's words too
        late = _acagpu(shell, "run", "--yes", "--env", "lab", "--max-minutes", "1", IMAGE, "--", "sh", "-c",
                       "echo started; sleep 30")  # fmt: skip
        assert late.returncode == 4, late.stderr
        assert "--max-minutes 1" in late.stderr and "tester" not in late.stderr.lower(), late.stderr
        run = subprocess.Popen(
            [*ACAGPU, "run", "--yes", "--env", "lab", "-o", "json", IMAGE, "--", "sh", "-c", SLEEPER],
            env=shell,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while True:  # until its container runs (its job exists and bills)
                listed = _acagpu(shell, "env", "show", "lab", "-o", "json")
                if json.loads(listed.stdout).get("replicas_running"):
                    break
                assert time.monotonic() < deadline and run.poll() is None, listed.stdout
                time.sleep(0.5)
            time.sleep(2)
            gone = _acagpu(shell, "env", "delete", "lab", "--force", "--yes")
            assert gone.returncode == 0, gone.stderr
            deleted = time.monotonic()
            out, err = run.communicate(timeout=90)
            noticed = time.monotonic() - deleted
        finally:
            if run.poll() is None:
                run.kill()
        doc = json.loads(out)
        assert noticed < 20, (noticed, err)  # not at the container's own end, a minute later
        assert run.returncode == 7, err
        message = doc["error"]["message"]
        assert "deleted" in message and doc["error"]["code"] == "JobDeleted", message
        assert "tester" not in (err + out).lower(), err
        # counted until the job went, not until the container would have ended
        assert doc["cost"]["gpu_seconds"] < 25, doc["cost"]
