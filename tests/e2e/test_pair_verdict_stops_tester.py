"""A pair whose probe already gave the verdict stops its tester at once, before teardown.

The probe and the tester are tasks of one runner (engine/task_runner.py): when the pair's verdict is
known (here a GPU with uncorrectable ECC errors), the runner stops the tester's execution
(billing first) instead of leaving it to bill until teardown deletes its job.

Real processes: `acagpu emulator serve` with the GPU fault and the tester's pull held (so the
tester is surely still on its way when the probe's verdict comes), the chaos proxy in front
(whose traffic record is what this test reads), and `acagpu up` as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.serving import emulator_get, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
FAULTS = "gpu:health=ecc;pull_stall:match=gpu-tester"


def test_a_failed_gpu_stops_the_tester_before_its_job_is_deleted(tmp_path: Path) -> None:
    with serve_behind_proxy(tmp_path, extra=("--registered", "--faults", FAULTS)) as (emu, proxy, shell):
        done = subprocess.run(
            [*ACAGPU, "up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "30", "-o", "json"],
            env=shell,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 5, done.stderr[-2000:]
        doc = json.loads(done.stdout)
        assert "GPU health failed" in doc["error"]["message"], doc["error"]
        sent = [(t["method"], t["path"].split("?", 1)[0]) for t in proxy.traffic]
        tester = [(i, m, p) for i, (m, p) in enumerate(sent) if "/jobs/gpu-tester-" in p]
        stops = [i for i, m, p in tester if m == "POST" and p.endswith("/stop")]
        deletes = [i for i, m, p in tester if m == "DELETE"]
        said = [f"{m} {p.split('/jobs/', 1)[1]}" for _, m, p in tester][-6:]
        assert stops, f"the tester's execution was never stopped; its job's last requests: {said}"
        assert deletes and stops[0] < deletes[0], (stops, deletes)
        assert doc["teardown"]["billing_stopped"], doc["teardown"]
        assert emulator_get(emu, "inventory")["jobs"] == []
