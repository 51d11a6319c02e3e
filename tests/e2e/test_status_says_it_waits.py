"""`acagpu status` says what it waits for while ARM is slow to answer or its answers are retried.

status reads every run's jobs and executions to price it; with those reads retried (a truncated
answer, a slow proxy) it sat for 55-58 s printing nothing at all, table or JSON, where `reap` in the
same state said `... waiting for find acagpu resource groups`.

Real processes: `acagpu emulator serve`, the chaos proxy in front holding each job listing for 4 s,
and `acagpu status` as a subprocess with its progress period at 0.3 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.serving import serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_status_says_what_it_waits_for_when_arm_is_slow(tmp_path: Path, fmt: str) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        shell = shell | {"ACAGPU_PROGRESS_S": "0.3", "ACAGPU_CACHE_DIR": str(tmp_path)}
        kept = _acagpu(shell, "up", "--yes", "--keep", "--run-id", "slow1", "-o", "json")
        assert kept.returncode == 0, kept.stderr
        proxy.set_rules(
            {"rules": [{"fault": "latency", "method": "GET", "path": r"/jobs$", "seconds": 4, "count": 0}]}
        )
        began = time.monotonic()
        done = _acagpu(shell, "status", "-o", fmt)
        waited = time.monotonic() - began
        proxy.set_rules({"rules": []})
        assert waited >= 4, waited  # the listing was held: there was a wait to speak about
        assert done.returncode == 0, done.stderr
        if fmt == "json":
            assert [r["run_id"] for r in json.loads(done.stdout)["runs"]] == ["slow1"]
        assert "... waiting for" in done.stderr, done.stderr  # said while it waited, not silent
        gone = _acagpu(shell, "down", "--run-id", "slow1", "--yes", "--no-wait")
        assert gone.returncode == 0, gone.stderr
