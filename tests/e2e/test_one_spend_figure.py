"""A kept run's spend through the CLI against the emulator: `status` and `reap` show one figure, and
each names the price table it came from (issue 23 "one spend figure", issue 21 build 1)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.cost import load_prices


def _json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _settled_run(run_id: str) -> dict[str, Any]:
    """The run as `status` shows it once its tester has ended (its figure then stays put)."""
    deadline = time.monotonic() + 20
    while True:
        run: dict[str, Any]
        (run,) = [r for r in _json("status")["runs"] if r["run_id"] == run_id]
        if run["phase"] == "stopped" or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def test_status_and_reap_show_one_figure_for_a_kept_run(
    emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))  # the bundled table, and no user ledger
    up = _json("up", "--gpu", "t4", "--keep", "--ttl", "1s", "--run-id", "spend1", "--yes")
    assert up["teardown"]["status"] == "kept"
    run = _settled_run("spend1")
    assert run["phase"] == "stopped", run
    reaped = _json("reap")  # a dry run: the kept run has expired
    (item,) = [i for i in reaped["items"] if i["run_id"] == "spend1"]
    assert item["status"] == "would-delete"
    assert item["spend_usd_estimate"] == run["cost"]["usd_estimate"] is not None, (item, run)
    label = load_prices().label
    assert run["cost"]["prices"] == reaped["prices"] == label
    text = CliRunner().invoke(cli, ["reap"])
    assert f"({label})" in text.stdout, text.stdout


def test_a_kept_runs_up_status_reap_and_cost_say_one_figure_before_and_after_a_wake(
    emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 item 11: one kept run read $0.0011 (up), $0.0018+ (status), $0.0026 (the guard)
    and $0.0039 (cost). Its group now records what acagpu measured (`spend/record.py`), read by
    `status`, `reap` and the guard alike (tests/unit/test_guard_rules.py), and `cost` sums the same
    lives from the ledger: one figure, also after an `smi` wake adds the explorer's later life."""
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))
    up = _json("up", "--gpu", "t4", "--keep", "--ttl", "1s", "--run-id", "one11", "--yes")
    assert up["teardown"]["status"] == "kept"
    measured, usd = float(up["cost"]["gpu_seconds"]), round(float(up["cost"]["usd_estimate"]), 4)

    def figures() -> tuple[float, float | None, float | None, float | None]:
        (run,) = [r for r in _json("status")["runs"] if r["run_id"] == "one11"]
        (item,) = [i for i in _json("reap")["items"] if i["run_id"] == "one11"]
        (row,) = _json("cost", "--run-id", "one11")["runs"]
        assert run["cost"]["uncounted"] is None, run["cost"]  # nothing left out: the group records it
        estimate = None if row["estimate_usd"] is None else round(row["estimate_usd"], 4)
        return (
            float(run["cost"]["gpu_seconds"]),
            run["cost"]["usd_estimate"],
            item["spend_usd_estimate"],
            estimate,
        )

    seconds, shown, reaped, estimated = figures()
    assert abs(seconds - measured) <= 0.05 and shown == reaped == estimated == usd, (figures(), up["cost"])
    smi = CliRunner().invoke(cli, ["smi", "--run-id", "one11", "-o", "json"])
    assert smi.exit_code == 0, smi.stderr
    seconds, shown, reaped, estimated = figures()
    assert seconds > measured and shown == reaped == estimated, figures()  # the wake is in all three
