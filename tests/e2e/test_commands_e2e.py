"""Every run command end to end over HTTPS against the emulator; nothing is left behind afterwards."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli

# --max-minutes is on the emulated clock: 5 minutes at the e2e scale (0.005) was 1.5 wall s for a
# tester job's whole life, which placement on a loaded machine outran (DeadlineExceeded); 30 is 9 s
UP = ["up", "--yes", "--start-timeout", "20s", "--max-minutes", "30"]


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _empty(emu: Any) -> bool:
    return bool(emu.inventory()["empty"])


def _nothing_bills(emu: Any) -> bool:
    """No app, job or replica left: what is left is at most a group whose delete was accepted."""
    inv = emu.inventory()
    return not any(inv.get(k) for k in ("apps", "jobs", "replicas")) and all(
        g["deleting"] for g in inv["resource_groups"]
    )


def _gone(emu: Any, timeout: float = 30.0) -> bool:
    """The accepted group deletes finish on the emulator's clock; wait for the inventory to empty."""
    import time

    end = time.monotonic() + timeout
    while not _empty(emu):
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def test_full_lifecycle_keep_smi_exec_logs_test_status_down(emu: Any) -> None:
    code, out, err = _run(*UP, "--run-id", "life1", "--keep", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "ok" and doc["teardown"]["status"] == "kept"
    assert doc["explorer"]["driver_version"] and doc["tester"]["result"]["status"] == "pass"
    # "kept (billing stopped)" is true when it is said: the tester, which stays its result grace,
    # was stopped at its result line (stating its exit code), the explorer stopped; nothing runs
    assert doc["teardown"]["billing_stopped"] is True
    assert (doc["tester"]["exit_code"], doc["tester"]["exit_code_note"]) == (0, None)
    assert [r["name"] for r in emu.inventory()["replicas"] if r["phase"] != "Terminated"] == []

    code, out, err = _run("smi", "--run-id", "life1", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["driver_version"] == doc["explorer"]["driver_version"]

    code, out, err = _run("exec", "--run-id", "life1", "--", "sh", "-c", "exit 3")
    assert code == 3, err
    emu.set_faults("ws_drop:count=1")  # the session drops mid-command: lost (7), never a remote `false` (1)
    code, out, err = _run("exec", "--run-id", "life1", "--", "sh", "-c", "sleep 1")
    emu.set_faults("")
    assert code == 7 and "lost the exec session" in err and "hint:" in err, (code, err)

    # while the finished replica is still listed its console log is served (the tester's lines);
    # once the execution ended ACA keeps no replica, so there is no console stream, and it says so
    deadline = time.monotonic() + 30
    while True:
        code, out, err = _run("logs", "--run-id", "life1", "--tester", "--tail", "50")
        if code != 0 or time.monotonic() > deadline:
            break
        assert "acagpu gpu-tester" in out, out
        time.sleep(0.2)
    assert code == 2 and "ended" in err and out == "", (code, out, err)
    code, out, err = _run("logs", "--run-id", "life1", "--system", "-o", "json")
    assert code == 0, err
    events = json.loads(out)["events"]
    assert events and {"Reason", "Msg"} <= set(events[0]), "system events of the explorer"
    code, out, err = _run("logs", "--run-id", "life1", "--system")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["TIME", "TYPE", "REASON"], out

    code, out, err = _run("test", "--run-id", "life1", "--start-timeout", "20s", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["tester"]["result"]["status"] == "pass"

    # `up --run-id` of the kept run resumes it and keeps it (deleting it is `down`'s)
    code, out, err = _run(*UP, "--run-id", "life1", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["teardown"]["status"] == "kept", out
    assert [g["deleting"] for g in emu.inventory()["resource_groups"]] == [False]

    code, out, err = _run("status", "-o", "json")
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["life1"]
    code, out, err = _run("status", "-o", "tsv")  # a listing's rows, as `az -o tsv` prints them
    assert code == 0 and out.split("\t")[0] == "life1", out

    code, out, err = _run("down", "--run-id", "life1", "--yes", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}
    assert _empty(emu)

    code, out, err = _run("down", "--run-id", "life1", "--yes", "-o", "json")  # idempotent cleanup
    assert code == 0 and json.loads(out)["teardown"]["status"] == "absent", err


def test_up_without_keep_leaves_nothing(emu: Any) -> None:
    code, out, err = _run(*UP, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    # the prompt returns once nothing bills; the group finishes deleting on its own
    assert doc["teardown"] == {"status": "deleting", "verified": False, "billing_stopped": True}
    assert doc["cost"]["gpu_seconds"] > 0
    assert _nothing_bills(emu)
    assert _gone(emu)


def test_up_wait_returns_once_the_group_is_gone(emu: Any) -> None:
    code, out, err = _run(*UP, "--wait", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}
    assert doc["timings"]["time_to_gone_s"] >= doc["timings"]["time_to_verdict_s"]
    assert _empty(emu)


@pytest.mark.parametrize(
    "args",
    [["--gpu", "h100x"], ["--ttl", "0m"], ["-l", "east us!"], ["--run-id", "abcdefghijklm"]],
)
def test_bad_input_exits_2_and_creates_nothing(emu: Any, args: list[str]) -> None:
    code, out, _ = _run(*UP, *args)
    assert code == 2 and out == ""
    assert _empty(emu)


def test_dry_run_creates_nothing(emu: Any) -> None:
    code, out, _ = _run(*UP, "--dry-run", "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "planned"
    assert _empty(emu)


@pytest.mark.parametrize(
    ("faults", "codes"),
    [
        ("429:count=3,retry_after=1", {0}),
        ("5xx:count=2,status=503", {0}),
        ("ws_drop:count=1", {0}),
        ("log_drop:count=1", {0}),  # the follow reconnects at once and replays the tail
        ("stuck", {4}),
        ("quota", {3}),
        ("slow_delete:factor=3", {0}),
    ],
)
def test_fault_matrix_ends_in_success_or_its_exit_code(emu: Any, faults: str, codes: set[int]) -> None:
    emu.set_faults(faults)
    # "stuck" waits 10 wall s for a replica to start, then exit 4. The faults that must end well
    # (429s with Retry-After, 5xx, a dropped socket) add seconds of their own, and a busy machine
    # more: 200 minutes, whose probe job's replica timeout (on the emulated clock, 0.005) is ~60 wall
    # s; the default start timeout's 1800 s are 9 wall s, which a busy machine outlived
    start = "10s" if 4 in codes else "200m"
    code, out, err = _run(*UP, "--start-timeout", start, "-o", "json")
    assert code in codes, (code, err)
    doc = json.loads(out)  # even a failed run prints its one document
    assert doc["teardown"]["billing_stopped"] is True, doc["teardown"]
    assert _nothing_bills(emu)
    emu.set_faults("")
    _run("down", "--run-id", doc["run_id"], "--yes")
    assert _empty(emu)


def test_up_github_summary_and_human_step_log(
    emu: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = _run(*UP, "--github")
    assert code == 0, err
    assert "run " in out and "teardown       deleting (billing stopped)" in out
    for phase in ("resource group", "environment", "probe and test", "teardown"):
        assert f"✓ {phase}" in err  # one step line per phase on stderr
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## acagpu up — run ") and "| tester result | pass" in text
    assert _gone(emu)
