"""GPU-seconds under faults (issue 36, item E): a `run`'s figure is held to what the emulator billed,
and says how it was known, when the proxy cuts every log stream before the service accepts it.

Before: a 2 s container read 0.001 s (no start seen: the least a container that ran can cost) and
the document said nothing of it. Now the platform's events stand in for what the client lost, the
figure is within a second of the bill (the events have whole-second times, as on Azure), and the
document says so (`gpu_seconds_quality`, the notes). The other faults (failed status reads, slow or
failed listings, a stream closed early) and the ARM bound are judged by the same rule
(`engine/lifetime.py`), held by tests/unit/test_lifetime.py; a run through 503s on its status reads
spends ~50 s in the SDK's back-off, too long for the suite.

Real processes: `acagpu emulator serve`, the chaos proxy in front, the CLI as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.serving import emulator_get, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
CUT = {"fault": "stream_cut", "path": "logstream", "after_lines": 0, "count": 0}
FAILED_READS = {
    "fault": "status",
    "method": "GET",
    "path": "/executions",
    "status": 503,
    "count": 0,
    "rate": 0.6,
}


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=240)


def _billed(emu: dict[str, str], run_id: str) -> float:
    rows = [r for r in emulator_get(emu, "billing")["replicas"] if r["run_id"] == run_id]
    assert rows, run_id
    return float(sum(r["gpu_seconds"] for r in rows))


def test_a_runs_gpu_seconds_stay_true_and_say_how_they_were_known_when_its_streams_are_cut(
    tmp_path: Path,
) -> None:
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        shell = shell | {"ACAGPU_CACHE_DIR": str(tmp_path / "cache"), "ACAGPU_POLLING_INTERVAL": "1"}
        made = _acagpu(shell, "env", "create", "lab", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        proxy.set_rules({"rules": [CUT]})
        done = _acagpu(shell, "run", "-o", "json", "--env", "lab", "--yes", "--run-id", "cut1",
                       IMAGE, "--", "sh", "-c", "sleep 2")  # fmt: skip
        proxy.set_rules({"rules": []})
        assert done.returncode == 0, done.stderr[-2000:]
        cost, billed = json.loads(done.stdout)["cost"], _billed(emu, "cut1")
        # the platform's events have whole seconds: within one of the bill
        assert abs(float(cost["gpu_seconds"]) - billed) <= 1.1, (cost, billed)
        assert cost["gpu_seconds_quality"] == "platform-events" and not cost["estimated"], cost
        (note,) = cost["gpu_seconds_notes"]
        assert "start was not seen" in note and "ContainerStarted" in note, note
