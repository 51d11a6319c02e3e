"""A `run --wait-for-capacity` behind the chaos proxy: resets and a 429 storm while it waits, then Ctrl-C.

eastus has no T4 (the emulator's `nocapacity`), so the run parks its place after the first sweep and
asks it for room once per sweep (one start of its probe job). Between the client and the emulator:
the connection of one probe start is reset before ARM sees it, another's after ARM took it (its
answer lost), and half the reads of the probe's execution are answered 429. Each ask is still one
start in the emulator's own count of ARM writes (a lost answer is looked for by its token, never
sent again), the run keeps waiting, and a SIGINT to the real process between sweeps ends it with
exit 130 and its one JSON document: no traceback, nothing left behind in the emulator.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import requests

from aca_gpu.emulator.server import EmulatorServer
from tests.chaos.proxy import ChaosProxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
PROBE_START = "jobs/gpu-room-[^/]+/start"


def _events(proxy: ChaosProxy) -> list[dict[str, Any]]:
    answer = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=10)
    found: list[dict[str, Any]] = answer.json()["events"]
    return found


@pytest.mark.slow(9)  # three sweeps' gaps, 429s answered after their Retry-After
def test_a_wait_rides_out_resets_and_429s_and_a_ctrl_c_leaves_nothing(
    upstream: EmulatorServer, proxy: ChaosProxy, tmp_path: Any
) -> None:
    upstream.set_faults("nocapacity:region=eastus,profile=T4")
    proxy.set_rules(
        {
            "seed": 3,
            "rules": [
                {"fault": "reset", "method": "POST", "path": PROBE_START, "count": 1},
                {"fault": "reset", "when": "after", "method": "POST", "path": PROBE_START, "count": 1},
                {"fault": "throttle", "method": "GET", "path": "/executions/", "rate": 0.5, "count": 0,
                 "retry_after": 1},
            ],
        }
    )  # fmt: skip
    shell = (
        os.environ
        | upstream.client_env()
        | {
            "ACAGPU_ARM_ENDPOINT": proxy.endpoint,
            "ACAGPU_CA_BUNDLE": proxy.ca_bundle,
            "ACAGPU_POLLING_INTERVAL": "0.1",
            "ACAGPU_CAPACITY_GAP_S": "0.3",
            "ACAGPU_CACHE_DIR": str(tmp_path / "cache"),
        }
    )
    for key in ("ACAGPU_ENV", "ACAGPU_CONFIG", "ACAGPU_REGIONS"):
        shell.pop(key, None)
    run = subprocess.Popen(
        [*ACAGPU, "run", "--yes", "-o", "json", "-l", "eastus", "--start-timeout", "60s",
         "--max-minutes", "10", "--wait-for-capacity", "2h", "busybox", "--", "sh", "-c", "echo hi"],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stderr is not None
    said = ""
    try:
        while said.count("waiting for a T4") < 3:  # two sweeps of asks behind the faults
            line = run.stderr.readline()
            assert line, said
            said += line
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    said += err
    assert run.returncode == 130, said
    assert "Traceback" not in said, said
    doc = json.loads(out)  # one document, also on Ctrl-C
    assert doc["status"] == "interrupted" and doc["error"]["code"] == "Interrupted", doc["error"]
    fired = sorted({(e["fault"], e.get("when", "")) for e in _events(proxy)})
    assert fired == [("reset", "after"), ("reset", "before"), ("throttle", "")], fired
    # every ask was one start in the emulator's own count, however its answer was lost
    asks = doc["capacity_wait"]["asks"]
    assert len(asks) >= 2 and all(a["places"][0]["answer"] == "no-capacity" for a in asks), asks
    starts = [w for w in upstream.ctx.writes.describe()["writes"] if "/gpu-room-" in w["path"]]  # type: ignore[union-attr]
    starts = [w for w in starts if w["path"].endswith("/start")]
    for ask in asks:
        during = [w for w in starts if ask["began_at"] <= w["at"] <= ask["ended_at"]]
        assert len(during) == 1, (ask, during)
    # nothing left behind: the parked place went with the run, billing first
    inventory = upstream.inventory()
    assert not [g for g in inventory["resource_groups"] if not g["deleting"]], inventory
    assert not [j for j in inventory["jobs"] if not j["deleting"]] and not inventory["replicas"], inventory
