"""`env create --wait-for-capacity` and `serve --wait-for-capacity` / `serve --max-cost` against the
session emulator (the real SDK over HTTPS, commands through Click).

An environment places nothing by itself: with no T4 in eastus, `env create --wait-for-capacity`
makes it, then asks it for room with one probe start per sweep (the emulator's own count of ARM
writes), ends at its bound with exit 3 keeping the environment (it bills nothing), and once the
region has room again ends 0 with the probe job gone.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.server import EmulatorServer
from tests.e2e.serving import free_port


def _json(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, list(args))
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.stderr


def _starts(emu: EmulatorServer) -> list[dict[str, Any]]:
    return [w for w in emu.ctx.writes.describe()["writes"] if w["path"].endswith("/start")]  # type: ignore[attr-defined]


@pytest.mark.slow(7)  # each ask waits out its probe's 300 emulated seconds
def test_env_create_waits_for_room_with_one_probe_start_per_sweep(
    emu: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACAGPU_CAPACITY_GAP_S", "0.2")
    emu.set_faults("nocapacity:region=eastus,profile=T4")
    code, doc, err = _json(
        "env", "create", "lab", "-l", "eastus", "--wait-for-capacity", "2s", "--yes", "-o", "json"
    )
    assert code == 3, err
    assert doc["error"]["code"] == "CapacityWaitExpired", doc["error"]
    assert "environment lab is made and bills nothing" in doc["error"]["hint"], doc["error"]
    asks = len(_starts(emu))
    assert asks >= 2 and "waiting for a T4: no capacity in eastus (no capacity)" in err, err
    # one write per sweep: after the environment's own writes, the probe job made once, one start per
    # sweep, and its delete at the end
    writes = emu.ctx.writes.describe()["writes"]  # type: ignore[attr-defined]
    made = max(
        i for i, w in enumerate(writes) if "/managedEnvironments/" in w["path"] and w["method"] == "PUT"
    )
    waited = [(w["method"], w["path"].rsplit("/", 2)[-2:]) for w in writes[made + 1 :]]
    assert waited == [("PUT", ["jobs", "gpu-room-lab"])] + [("POST", ["gpu-room-lab", "start"])] * asks + [
        ("DELETE", ["jobs", "gpu-room-lab"])
    ], waited
    inventory = emu.inventory()
    assert len(inventory["environments"]) == 1, inventory  # the environment stays: it bills nothing
    assert not inventory["jobs"] and not inventory["replicas"], inventory  # the probe went

    emu.set_faults("")  # room again
    code, doc, err = _json(
        "env", "create", "lab", "-l", "eastus", "--wait-for-capacity", "1h", "--yes", "-o", "json"
    )
    assert code == 0, err
    assert doc["capacity_wait"]["placed"] == "eastus" and len(doc["capacity_wait"]["asks"]) == 1, doc
    assert len(_starts(emu)) == asks + 1
    assert not emu.inventory()["jobs"]


@pytest.mark.slow(10)  # two asks, then a model that loads for 30 s until the cap stops it
def test_serve_waits_for_room_before_its_app_and_its_cap_stops_the_app_billing_first(
    emu: EmulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No T4 in eastus: `serve --wait-for-capacity` makes no app until a probe start is placed (one
    per sweep); then the model loads slowly and `--max-cost` (2.5 replica-seconds) stops the app
    while serve waits for its first answer: exit 8, the app scaled to 0 and deleted, the emulator's
    bill within the cap and the stated bound."""
    monkeypatch.setenv("ACAGPU_CAPACITY_GAP_S", "0.2")
    port = str(free_port())
    model = ("python:3.12-slim", "--", "sh", "-c", f"sleep 30; exec python3 -m http.server {port}")
    code, planned, err = _json("serve", "--dry-run", "-o", "json", "--port", port, *model)
    per_s = planned["price"]["usd_per_hour"] / 3600
    cap = round(per_s * 2.5, 7)
    emu.set_faults("nocapacity:region=eastus,profile=T4")

    def room_later() -> None:  # capacity comes back once serve has asked once
        deadline = time.monotonic() + 60
        while not _starts(emu) and time.monotonic() < deadline:
            time.sleep(0.05)
        emu.set_faults("")

    threading.Thread(target=room_later, daemon=True).start()
    code, doc, err = _json(
        "serve", "--yes", "-o", "json", "--run-id", "wc1", "--port", port, "--load-timeout", "10m",
        "--wait-for-capacity", "1h", "--max-cost", str(cap), *model,
    )  # fmt: skip
    assert code == 8, err
    assert doc["error"]["code"] == "CostCapReached" and doc["cost_cap"]["reached"], doc
    assert doc["teardown"]["billing_stopped"], doc["teardown"]
    asks = doc["capacity_wait"]["asks"]
    assert len(asks) >= 2 and asks[-1]["places"][0]["answer"] == "room", asks
    assert all(a["places"][0]["writes"] == 1 for a in asks[:-1]), asks  # one start per sweep without room
    # no app was made before the room: the app's create is after the last ask began
    writes = emu.ctx.writes.describe()["writes"]  # type: ignore[attr-defined]
    app_made = next(
        w["at"] for w in writes if "/containerApps/serve-wc1" in w["path"] and w["method"] == "PUT"
    )
    assert app_made >= asks[-1]["began_at"], (app_made, asks)
    # the emulator's bill: the app's replica within the cap, the bound and the time ARM took to stop it
    bill = [r for r in emu.billing()["replicas"] if r["run_id"] == "wc1" and r["kind"] == "app"]
    assert bill and not [r for r in bill if r["running"]], bill
    spent = sum(r["wall_seconds"] for r in bill) * per_s
    slack = per_s * (doc["cost_cap"]["look_every_s"] + 2.0)  # the stop's scale-to-0 and its own look
    assert spent <= cap + doc["cost_cap"]["overshoot_bound_usd"] + slack, (spent, doc["cost_cap"])
    assert not [a for a in emu.inventory()["apps"] if "wc1" in a["name"] and not a["deleting"]]
