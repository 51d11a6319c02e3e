"""The Log Analytics workspace step of `env create` (and of every cold run) under faults.

Its PUT is idempotent, its shared-keys POST only reads, and a 404 right after its create is ARM's
eventual consistency: like every other create step, none of these ends the command. Real
processes: `acagpu emulator serve`, the chaos proxy in front, the CLI as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.serving import serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
WORKSPACE = "workspaces/log-cae-acagpu-env-lab"


def test_a_reset_a_502_a_cut_answer_and_a_404_after_create_on_the_workspace_step_are_ridden_out(
    tmp_path: Path,
) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
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
        made = subprocess.run(
            [*ACAGPU, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json"],
            env=shell, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr  # 0.4: exit 2 ("not found") or 7
        fired = sorted({(e["fault"], e["method"]) for e in proxy.events})
        assert fired == [("not_found_after_put", "GET"), ("not_found_after_put", "PUT"), ("reset", "PUT"),
                         ("status", "POST"), ("truncate", "POST")], proxy.events  # fmt: skip
        assert json.loads(made.stdout)["state"] == "idle", made.stdout
