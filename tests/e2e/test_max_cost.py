"""`run --shards N --max-cost USD` against `acagpu emulator serve`: the cap stops new starts and the
running shards within the stated overshoot bound (the emulator's own bill), the document says which
shards ran and which did not, and `--rerun-failed` under a new cap completes the rest.

Each shard's `sleep 1` runs for real in the emulator's sandbox, so its replica's life is wall time
(the bill's `wall_seconds`); the cap is priced on the same wall seconds. A single run's container
is stopped at its cap the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aca_gpu.units import usd_text
from tests.e2e.serving import emulator_get, emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SHARDS = ["--shards", "12", "--parallel", "4", "busybox", "--", "sh", "-c", "sleep 1"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


@pytest.mark.slow(15)
def test_a_fanout_stops_at_its_cost_cap_within_the_bound_and_a_rerun_completes_it(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", time_scale=0.002) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path / "c")}
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG", "ACAGPU_REGIONS"):
            shell.pop(key, None)
        planned = json.loads(
            _acagpu(shell, "run", "--dry-run", "-o", "json", "--max-cost", "1", *SHARDS).stdout
        )
        assert planned["fanout_price"]["max_cost_usd"] == 1  # the plan shows the cap beside the ceiling
        per_s = planned["fanout_price"]["usd_per_second_per_shard"]
        cap = round(per_s * 14, 7)  # 14 replica-seconds: one or two rounds of four 1 s shards, not three

        capped = _acagpu(shell, "run", "--yes", "-o", "json", "--max-cost", str(cap), *SHARDS)
        assert capped.returncode == 8, capped.stderr
        doc = json.loads(capped.stdout)
        assert doc["error"]["code"] == "CostCapReached", doc["error"]
        assert "succeeded" in doc["error"]["message"] and "not done" in doc["error"]["message"]
        assert f"--rerun-failed {doc['run_id']}" in doc["error"]["hint"]
        states = {s["index"]: s["status"] for s in doc["shards"]}
        done = [k for k, v in states.items() if v == "succeeded"]
        assert 0 < len(done) < 12, states
        assert doc["summary"]["unfinished_indexes"], doc["summary"]  # stopped or never started
        assert "Traceback" not in capped.stderr
        # the emulator's bill: what the replicas lived (wall), priced, within the cap + the bound
        bill = emulator_get(emu, "billing")["replicas"]
        spent = sum(r["wall_seconds"] for r in bill) * per_s
        # the stated bound, plus what the running replicas billed while ARM accepted their stops
        stopping = 4 * per_s * doc["cost_cap"]["stops_took_s"]
        assert spent <= cap + doc["cost_cap"]["overshoot_bound_usd"] + stopping, (spent, doc["cost_cap"])
        assert not [r for r in bill if r["running"]], bill  # what ran was stopped
        # `cost` sets the cap beside the bill (the run's ledger lines carry it, its group its tag)
        costed = _acagpu(shell, "cost", "--run-id", doc["run_id"], "--min-difference", "0", "-o", "json")
        assert costed.returncode == 0, costed.stderr
        row = json.loads(costed.stdout)["runs"][0]
        assert row["max_cost_usd"] == cap and row["billed_usd"], row
        assert row["over_cap"] is (row["billed_usd"] > cap), row
        shown = _acagpu(shell, "cost", "--run-id", doc["run_id"], "--min-difference", "0")
        assert "CAP" in shown.stdout and usd_text(cap) in shown.stdout, shown.stdout

        # a single run under a cap: its container stopped at it, exit 8 (side by side with the rerun)
        single = subprocess.Popen(
            [*ACAGPU, "run", "--yes", "-o", "json", "--max-cost", str(round(per_s * 3, 7)), "busybox", "--",
             "sh", "-c", "echo start; sleep 20; echo end"],
            env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        rerun = _acagpu(
            shell, "run", "--yes", "-o", "json", "--rerun-failed", doc["run_id"], "--max-cost", "1"
        )
        assert rerun.returncode == 0, rerun.stderr
        again = json.loads(rerun.stdout)
        assert sorted(s["index"] for s in again["shards"]) == sorted(set(states) - set(done))
        assert all(s["status"] == "succeeded" for s in again["shards"]), again["shards"]
        out, err = single.communicate(timeout=120)
        assert single.returncode == 8, err
        one = json.loads(out)
        assert one["error"]["code"] == "CostCapReached" and "end" not in one["output"]["stdout"], one
        stopping = per_s * one["cost_cap"]["stops_took_s"]
        assert one["cost"]["usd_estimate"] <= per_s * 3 + one["cost_cap"]["overshoot_bound_usd"] + stopping
