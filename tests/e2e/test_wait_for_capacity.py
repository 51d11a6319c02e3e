"""`--wait-for-capacity`: real processes against `acagpu emulator serve` whose capacity comes back.

eastus is WorkLoad Profile Full all along and westus3 has no T4 until the run waits: a run that
waits sweeps both, spends nothing while it waits (the emulator's bill has no replica outside the
place that worked), and places in westus3 at the next sweep once it has room. The next runs, side
by side, know it: one tries westus3 first (the unavailability cache says eastus was full), `check`
shows it, one allowed only eastus ends at its bound with exit 3 and its
region's last reason, a fan-out whose shards are never placed there does the same, and one
interrupted between sweeps ends with 130, leaving nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.e2e.serving import emulator_get, emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SCALE = 0.002
# eastus stays full past the test (`until=` far ahead); westus3 gets its capacity back once the run
# waits (the test takes its fault away when the waiting line comes: a loaded machine makes any
# emulated instant a race with the first sweep, which judges each place at its container's deadline)
FAULTS = "wpfull:region=eastus,profile=T4,until=999999"
NONE_IN_WESTUS3 = "nocapacity:region=westus3,profile=T4"
RUN = ["run", "--yes", "-o", "json", "--regions", "eastus,westus3", "--max-minutes", "10"]
IMAGE = ["busybox", "--", "sh", "-c", "echo hi"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _started(shell: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ACAGPU, *args], env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _until_waiting(run: subprocess.Popen[str], lines: int = 1) -> str:
    """Its stderr up to its `lines`-th waiting line."""
    assert run.stderr is not None
    said = ""
    while said.count("waiting for a T4") < lines:
        line = run.stderr.readline()
        assert line, said
        said += line
    return said


def _faults(emu: dict[str, str], spec: str) -> None:
    answer = requests.put(
        f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/faults",
        data=spec,
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    )
    answer.raise_for_status()


@pytest.mark.slow(19)
def test_a_run_waits_spends_nothing_places_where_capacity_comes_back_and_gives_up_at_its_bound(
    tmp_path: Path,
) -> None:
    faults = ("--faults", f"{FAULTS};{NONE_IN_WESTUS3}")
    with emulator_serve(tmp_path / "emu.env", time_scale=SCALE, extra=faults) as emu:
        shell = (
            os.environ
            | emu
            | {
                "ACAGPU_POLLING_INTERVAL": "0.1",
                "ACAGPU_CAPACITY_GAP_S": "0.5",  # the client's wall-clock gap, scaled down like the emulator
                "ACAGPU_CACHE_DIR": str(tmp_path / "cache"),
            }
        )
        for key in ("ACAGPU_ENV", "ACAGPU_CONFIG", "ACAGPU_REGIONS"):
            shell.pop(key, None)

        waiting = _started(shell, *RUN, "--wait-for-capacity", "2h", *IMAGE)
        said = _until_waiting(waiting)
        assert (
            "waiting for a T4: no capacity in eastus (WorkLoad Profile Full), westus3 (no capacity)" in said
        )
        assert "next try" in said and "gives up" in said
        said += _until_waiting(waiting)  # a sweep that only asks: each kept place once
        _faults(emu, FAULTS)  # westus3 has room again
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, said + err
        doc = json.loads(out)
        wait = doc["capacity_wait"]
        assert wait["placed"] == "westus3" and wait["sweeps"] >= 3, wait
        reasons = {p["region"]: p["reason"] for p in wait["places"]}
        assert reasons["eastus"] == "profile-full", wait
        used = [a for a in doc["attempts"] if a["status"] == "used"]
        assert [a["region"] for a in used] == ["westus3"], doc["attempts"]
        # at most one ARM write per region per sweep, by the emulator's count of this caller's writes:
        # each sweep after the first starts the probe job it kept in each place (nothing between
        # sweeps); the place that has room then deletes its probe and places the run itself there
        writes = emulator_get(emu, "writes")["writes"]
        asks = wait["asks"]
        answers = [{p["region"]: p["answer"] for p in ask["places"]} for ask in asks]
        assert len(asks) >= 2 and answers[-1]["westus3"] == "room", answers
        assert all(a == {"eastus": "profile-full", "westus3": "no-capacity"} for a in answers[:-1]), answers
        for ask, after in zip(asks, [*asks[1:], None], strict=True):
            room = {p["region"] for p in ask["places"] if p["answer"] == "room"}
            end = after["began_at"] if after else ask["ended_at"]
            during = [w for w in writes if ask["began_at"] <= w["at"] <= end]
            for region in ("eastus", "westus3"):
                mine = [w for w in during if w["region"] == region]
                if region in room:  # the start that found room, the probe's delete
                    assert [w["method"] for w in mine] == ["POST", "DELETE"], mine
                else:
                    assert len(mine) <= 1, (ask, mine)
                    assert all(w["path"].endswith("/start") for w in mine), mine
        # $0 while it waited: nothing billed but the probe that found room and the run's own container
        billed = [r for r in emulator_get(emu, "billing")["replicas"] if r["gpu_seconds"] > 0]
        found = next(p["execution"] for p in asks[-1]["places"] if p["region"] == "westus3")
        assert billed and {r["location"] for r in billed} == {"westus3"}, billed
        assert {r["resource"] for r in billed if r["parent"] != found} == {f"run-{doc['run_id']}"}, billed
        assert not [r for r in billed if r["running"]], billed

        # what the first run learnt, the next knows: eastus (full when last seen) goes last, and the
        # place that worked was forgotten
        cache = json.loads((tmp_path / "cache" / "unavailable.json").read_text(encoding="utf-8"))
        assert any(v["location"] == "eastus" for v in cache.values()), cache
        assert not any(v["location"] == "westus3" for v in cache.values()), cache
        # meanwhile, side by side: a run without a wait tries westus3 first; `check` shows what is known;
        # a run allowed only eastus (full all along) ends at its bound with exit 3 and the reason table
        second = _started(shell, *RUN, *IMAGE)
        checked = _started(shell, "check", "-l", "eastus", "--gpu", "t4", "-o", "json")
        gave_up = _started(
            shell, *RUN[:4], "--regions", "eastus", *RUN[6:], "--wait-for-capacity", "1s", *IMAGE
        )
        # a fan-out none of whose shards is ever placed waits too, and ends at its bound the same way
        shards = _started(shell, "run", "--yes", "-o", "json", "--shards", "2", "--regions", "eastus",
                          "--start-timeout", "2s", "--platform-retries", "0", "--wait-for-capacity", "1s",
                          *IMAGE)  # fmt: skip
        # Ctrl-C while one waits between sweeps: exit 130 at once, nothing of it left, no traceback
        stopped = _started(
            shell, *RUN[:4], "--regions", "eastus", *RUN[6:], "--wait-for-capacity", "2h", *IMAGE
        )
        assert stopped.stderr is not None
        said = ""
        while "waiting for a T4" not in said:
            line = stopped.stderr.readline()
            assert line, said
            said += line
        stopped.send_signal(signal.SIGINT)
        out, err = stopped.communicate(timeout=60)
        assert stopped.returncode == 130, said + err
        assert json.loads(out)["status"] == "interrupted" and "Traceback" not in said + err
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert json.loads(out)["attempts"][0]["region"] == "westus3"
        out, err = checked.communicate(timeout=120)
        assert checked.returncode == 0, err
        assert json.loads(out)["unavailable"][0]["location"] == "eastus", out
        out, err = gave_up.communicate(timeout=120)
        assert gave_up.returncode == 3, err
        doc = json.loads(out)
        assert doc["error"]["code"] == "CapacityWaitExpired", doc["error"]
        assert "eastus (WorkLoad Profile Full)" in doc["error"]["message"], doc["error"]
        assert [p["reason"] for p in doc["capacity_wait"]["places"]] == ["profile-full"], doc
        assert "every place's last reason" in err and "eastus" in err.split("REGION")[-1], err
        assert "Traceback" not in err
        out, err = shards.communicate(timeout=120)
        assert shards.returncode == 3, err
        doc = json.loads(out)
        assert doc["error"]["code"] == "CapacityWaitExpired", doc["error"]
        assert "none of 2 shards was ever placed" in doc["capacity_wait"]["places"][0]["detail"]
        inventory = emulator_get(emu, "inventory")  # nothing left behind by any of them
        assert not [g for g in inventory["resource_groups"] if not g["deleting"]], inventory
        assert not inventory["replicas"], inventory
