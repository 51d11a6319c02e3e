"""`acagpu env show` says what it waits for while ARM is slow to answer or its answers are retried.

env show reads the environment's jobs and executions to list the runs inside it and their spend;
with the job listing truncated it sat 26 s printing nothing on stderr, then `state: unknown`.

Real processes: `acagpu emulator serve`, the chaos proxy in front holding the environment's job
listing for 2 s, and `acagpu env show` as a subprocess with its progress period at 0.3 s.
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
def test_env_show_says_what_it_waits_for_when_arm_is_slow(tmp_path: Path, fmt: str) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        shell = shell | {"ACAGPU_PROGRESS_S": "0.3", "ACAGPU_CACHE_DIR": str(tmp_path)}
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {"rules": [{"fault": "latency", "method": "GET", "path": r"/jobs$", "seconds": 2, "count": 0}]}
        )
        began = time.monotonic()
        shown = _acagpu(shell, "env", "show", "lab", "-o", fmt)
        waited = time.monotonic() - began
        proxy.set_rules({"rules": []})
        assert waited >= 2, waited  # the listing was held: there was a wait to speak about
        assert shown.returncode == 0, shown.stderr
        if fmt == "json":
            assert json.loads(shown.stdout)["name"] == "lab"
        assert "... waiting for" in shown.stderr, shown.stderr  # said while it waited, not silent
        gone = _acagpu(shell, "env", "delete", "lab", "--yes")
        assert gone.returncode == 0, gone.stderr
