"""Cost, status and phases that tell the truth (issue 26, items 3-5), against `acagpu emulator serve`
as a real process and the CLI as a subprocess, as a user in a second shell runs them.

The emulator's own billing (`/_emulator/billing`: each replica's life in wall and emulated seconds)
is the judge of every cost figure: the client lives on the wall clock, as it does on Azure.

The tests of one worker share one server at `emulator serve`'s defaults (time scale 0.02,
registered) with the warm environment `lab` created once (`served`), and the tests whose figures do
not depend on the speed one 10x faster (`served_fast`): each test reads only its own runs (by run
id, in the server's billing and in `status`), so earlier tests' runs change nothing it checks. The
`cost` test keeps servers of its own: it lists every run the server has.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.errors import EXIT_INTERRUPTED
from tests.e2e.serving import emulator_get, emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
Served = tuple[dict[str, str], Path]  # the server's variables and the shared cache folder


def _run(shell: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _json(shell: dict[str, str], *args: str) -> dict[str, Any]:
    done = _run(shell, *args, "-o", "json")
    assert done.returncode == 0, (args, done.stderr[-2000:])
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _billing(emu: dict[str, str]) -> dict[str, Any]:
    return emulator_get(emu, "billing")


def _billed_wall_gpu_seconds(emu: dict[str, str], run_id: str) -> float:
    """The GPU-seconds the emulator billed for one run, on the wall clock the client lives on."""
    rows = [r for r in _billing(emu)["replicas"] if r["run_id"] == run_id]
    assert rows, f"the emulator billed nothing for {run_id}"
    return sum(r["wall_seconds"] * r["gpus"] for r in rows)


def _shell(emu: dict[str, str], tmp_path: Path, **extra: str) -> dict[str, str]:
    shell = os.environ | emu | {"ACAGPU_CACHE_DIR": str(tmp_path / "cache")} | extra
    shell.pop("ACAGPU_ENV", None)
    shell.pop("ACAGPU_POLLING_INTERVAL", None)  # a user's default polling (5 s), as the issue ran it
    return shell | extra


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`emulator serve` at its defaults (time scale 0.02) with `lab` created at the default polling;
    the folder is the shell's cache (prices, the spend ledger), shared like a user's."""
    home = tmp_path_factory.mktemp("spend")
    with emulator_serve(home / "emu.env", time_scale=None, extra=("--registered",)) as emu:
        _json(_shell(emu, home), "env", "create", "lab", "--gpu", "t4", "--yes")
        yield emu, home


@pytest.fixture(scope="module")
def served_fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """As `served`, at time scale 0.002 with `lab` made at 0.05 s polling: for the tests that read
    phases, clocks and whether a figure is above zero, none of which depends on the speed."""
    home = tmp_path_factory.mktemp("spend-fast")
    with emulator_serve(home / "emu.env", time_scale=0.002, extra=("--registered",)) as emu:
        fast = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.1")
        _json(fast, "env", "create", "lab", "--gpu", "t4", "--yes")
        yield emu, home


@pytest.mark.slow(40)
def test_warm_runs_bill_what_the_emulator_billed_at_default_polling(
    served: Served,
) -> None:
    """Item 3: `up --env`, `test --env` and `validate --env` said `0 GPU-seconds` while the emulator
    billed seconds of GPU for each. The client sees a container start at its next look (at most a
    second later, whatever the polling interval), so each figure is held to 25 % of the bill plus one
    look per container; the benchmark holds 5 % at 20 ms looks (benchmarks/cost_agreement.py)."""
    emu, home = served
    shell = _shell(emu, home)
    figures: dict[str, float] = {}
    for command in ("up", "test", "validate"):
        args = [command, "--env", "lab", "--yes"]  # `test --env` makes a run of its own: it asks too
        if command == "validate":
            args += ["--image", IMAGE, "--gpu", "t4"]
        doc = _json(shell, *args)
        figures[doc["run_id"]] = float(doc["cost"]["gpu_seconds"])
        # issue 36 item 8: `phases."nvidia-smi"` was negative in 3 of 6 `up -o json` at this polling
        assert all(v is None or v >= 0 for v in doc["phases"].values()), (command, doc["phases"])
    billed = {rid: _billed_wall_gpu_seconds(emu, rid) for rid in figures}
    for rid, measured in figures.items():
        assert billed[rid] > 0.2, (rid, billed)
        containers = 2  # the probe and the tester
        assert abs(measured - billed[rid]) <= 0.25 * billed[rid] + 1.0 * containers, (figures, billed)
    text = _run(shell, "up", "--env", "lab", "--run-id", "wtext", "--yes")
    assert text.returncode == 0, text.stderr
    (line,) = [line for line in text.stdout.splitlines() if line.strip().startswith("cost ")]
    assert " 0 GPU-seconds" not in line and "$0.00," not in line, line  # one rounding, one text


def test_test_env_names_only_the_image_it_ran(served: Served) -> None:
    """Smaller: `test --env` named the explorer image, which it never runs, as the one it tested."""
    emu, home = served
    shell = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.1")
    doc = _json(shell, "test", "--env", "lab", "--yes")
    unrun = doc["results"][0]["image"]  # the pair's explorer image: no container of it started
    assert doc["explorer"]["image"] is None and doc["explorer"]["status"] == "not-run", doc["explorer"]
    done = _run(shell, "test", "--env", "lab", "--yes")
    assert done.returncode == 0, done.stderr
    assert unrun not in done.stdout + done.stderr, done.stderr
    assert doc["tester_image"] in done.stderr, done.stderr


def test_status_sees_a_running_run_cold_and_warm(served_fast: Served) -> None:
    """Item 4: `status` said PHASE `empty`, SPEND $0.00 while a `run`'s container ran."""
    emu, home = served_fast
    shell = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.2")
    for rid, where in (("busyw", ["--env", "lab"]), ("busyc", ["--gpu", "t4"])):
        proc = subprocess.Popen(
            # 600 emulated minutes: the default 30 are 3.6 wall s at this time scale, less than the sleep
            [
                *ACAGPU,
                "run",
                "--yes",
                *where,
                "--run-id",
                rid,
                "--max-minutes",
                "600",
                IMAGE,
                "--",
                "sh",
                "-c",
                "sleep 40",  # outlives a `status` on a busy machine (seconds); Ctrl-C ends it
            ],
            env=shell,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[dict[str, Any]] = []
        try:
            deadline = time.monotonic() + 90
            while proc.poll() is None and time.monotonic() < deadline:
                runs = [r for r in _json(shell, "status")["runs"] if r["run_id"] == rid]
                seen += runs
                if any(r["phase"] == "running" and (r["cost"]["gpu_seconds"] or 0) > 0 for r in runs):
                    break
                time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGINT)  # seen (or not): the run stops its container, tears down
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_INTERRUPTED, err
        running = [r for r in seen if r["phase"] == "running"]
        assert running, (rid, [(r["phase"], r["cost"]) for r in seen])
        assert running[-1]["cost"]["gpu_seconds"] > 0 and running[-1]["cost"]["usd_estimate"] > 0
        assert running[-1]["executions"]["running"] == 1, running[-1]


@pytest.mark.slow(21)
def test_cost_flags_only_past_its_tolerance_and_lists_only_this_clouds_runs(tmp_path: Path) -> None:
    """Item 3: `cost` flagged runs over $0.0001 differences with a false "stalled" story repeated for
    each, and listed runs a former emulator had made (same subscription id, another cloud)."""
    cache = {"ACAGPU_CACHE_DIR": str(tmp_path / "cache")}
    with emulator_serve(tmp_path / "old.env", time_scale=0.002, extra=("--registered",)) as old:
        # the former cloud's run only has to be in the ledger: 10x faster and polled fast, its figure
        # is not read
        shell = _shell(old, tmp_path, ACAGPU_POLLING_INTERVAL="0.1", **cache)
        _json(shell, "up", "--gpu", "t4", "--run-id", "gone1", "--yes")
    with emulator_serve(tmp_path / "emu.env", time_scale=0.02, extra=("--registered",)) as emu:
        shell = _shell(emu, tmp_path, ACAGPU_POLLING_INTERVAL="0.1", **cache)
        _json(shell, "env", "create", "lab", "--gpu", "t4", "--yes")
        for rid in ("c1", "c2", "c3"):
            _json(shell, "up", "--env", "lab", "--run-id", rid, "--yes")
        doc = _json(shell, "cost")
        runs = {r["run_id"]: r for r in doc["runs"]}
        assert set(runs) == {"c1", "c2", "c3"}, runs  # not gone1: another cloud's run
        assert doc["tolerance"]["usd"] > 0 and doc["tolerance"]["pct"] > 0
        for run in runs.values():
            small = abs(run["difference_usd"]) <= doc["tolerance"]["usd"]
            assert not small or run["status"] == "billed", run
        text = _run(shell, "cost").stdout
        notes = [line for line in text.splitlines() if "stalled" in line or "more than estimated" in line]
        assert len(notes) == len(set(notes)), text


@pytest.mark.slow(25)
def test_phases_say_which_clock_and_up_shows_its_place(served_fast: Served) -> None:
    """Item 5: wall and emulated seconds side by side without a word; `up` without its resource
    group and environment rows; `test` with an empty phases row; `status` says keep false for a
    kept run; one money format (no `0 GPU-seconds, ≈ $0.0001`)."""
    emu, home = served_fast
    shell = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.1")
    doc = _json(shell, "up", "--gpu", "t4", "--run-id", "ph1", "--keep", "--yes")
    assert {"resource group", "environment"} <= set(doc["phases"]), doc["phases"]
    assert set(doc["phase_clocks"]) == set(doc["phases"]), doc["phase_clocks"]
    assert doc["phase_clocks"]["probe and test"] == "wall"
    (kept,) = [r for r in _json(shell, "status")["runs"] if r["run_id"] == "ph1"]
    assert kept["keep"] is True and kept["protected"] is False, kept
    tested = _run(shell, "test", "--run-id", "ph1")  # the kept run's tester again
    assert tested.returncode == 0, tested.stderr
    rows = [line for line in tested.stdout.splitlines() if line.strip().startswith("phases")]
    assert all(line.split("phases", 1)[1].strip() for line in rows), tested.stdout
    assert _run(shell, "down", "--run-id", "ph1", "--yes").returncode == 0

    doc = _json(shell, "up", "--gpu", "t4", "--run-id", "ph2", "--yes")
    clocks = doc["phase_clocks"]
    assert clocks["probe image pull"] == "platform" and clocks["nvidia-smi"] == "wall", clocks
    text = _run(shell, "up", "--gpu", "t4", "--run-id", "ph3", "--yes").stdout
    (probe_line,) = [line for line in text.splitlines() if line.strip().startswith("probe ")]
    assert "pull" in probe_line and "(platform clock)" in probe_line, text
    assert "(wall clock)" in probe_line, text  # ready after: the client's own look


@pytest.mark.slow(31)
def test_a_short_run_at_the_emulators_defaults_matches_its_bill_and_never_prints_zero(
    served: Served,
) -> None:
    """At `emulator serve`'s defaults (time scale 0.02) and the default polling, a 1 s `run`
    was priced +38-49 % (its end taken ~0.5 s late, when its execution was seen finished), and a
    figure above zero was rounded to `≈ $0.00` before its one money text. Held to: the `run`'s
    figure within 20 % of its bill plus 0.2 s, and `test --env`'s line never `$0.00`."""
    emu, home = served
    shell = _shell(emu, home)
    tested = _run(shell, "test", "--env", "lab", "--yes", "--run-id", "t0")
    assert tested.returncode == 0, tested.stderr
    (line,) = [ln for ln in tested.stdout.splitlines() if ln.strip().startswith("cost ")]
    assert "$0.00," not in line and "$0.00 " not in line, line
    done = _run(shell, "run", "--env", "lab", "--yes", "--run-id", "r1", IMAGE, "--", "sh", "-c", "sleep 1")
    assert done.returncode == 0, done.stderr
    (line,) = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip().startswith("cost ")]
    measured = float(line.split()[1])
    billed = _billed_wall_gpu_seconds(emu, "r1")
    assert abs(measured - billed) <= 0.2 * billed + 0.2, (line, billed)


def test_a_tester_shorter_than_a_look_is_not_counted_zero(served: Served) -> None:
    """`test --env` at the defaults printed 0.0 GPU-seconds for a tester billed 0.6 s: it
    printed before the stream attached (which waited for a look to see it running), so its start
    was taken from its replayed first line. The stream is now attached while the image pulls and
    its acceptance is the container's start."""
    emu, home = served
    doc = _json(_shell(emu, home), "test", "--env", "lab", "--yes", "--run-id", "t1")
    billed = _billed_wall_gpu_seconds(emu, "t1")
    assert abs(float(doc["cost"]["gpu_seconds"]) - billed) <= 0.5 * billed, (doc["cost"], billed)


@pytest.mark.slow(29)
def test_a_kept_runs_status_counts_what_its_group_records(served: Served) -> None:
    """A kept run showed three figures (summary, status, bill) and `status` counted its stopped
    explorer as 0 (later: said it left it out, `+`). ARM lists no stopped app's replicas, so the
    run's group now records what acagpu measured (issue 36 item 11): status shows the run's own
    figure, leaves nothing out, and is never above the emulator's bill for the run."""
    emu, home = served
    shell = _shell(emu, home)
    kept = _json(shell, "up", "--gpu", "t4", "--run-id", "k1", "--keep", "--yes")
    (run,) = [r for r in _json(shell, "status")["runs"] if r["run_id"] == "k1"]
    billed = _billed_wall_gpu_seconds(emu, "k1")
    assert run["cost"]["uncounted"] is None, run["cost"]
    assert abs(float(run["cost"]["gpu_seconds"]) - float(kept["cost"]["gpu_seconds"])) <= 0.05, run["cost"]
    assert float(kept["cost"]["gpu_seconds"]) <= billed + 1.0, (kept["cost"], billed)
    text = _run(shell, "status").stdout
    (row,) = [line for line in text.splitlines() if line.startswith("k1 ")]
    assert not row.rstrip().endswith("+") and "past use is not counted" not in text, text
    fast = shell | {"ACAGPU_POLLING_INTERVAL": "0.1"}  # the figures are read: deleting is not about them
    assert _run(fast, "down", "--run-id", "k1", "--yes").returncode == 0


def _three_figures(emu: dict[str, str], shell: dict[str, str], docs: list[dict[str, Any]]) -> None:
    """acagpu's GPU-seconds against the emulator ledger's, and acagpu's estimate against Cost
    Management's bill (`cost`), for each run; within one look per container (the probe and the
    tester, or two shards)."""
    ledger = _billing(emu)["runs"]
    wanted = [arg for doc in docs for arg in ("--run-id", doc["run_id"])]
    rows = {r["run_id"]: r for r in _json(shell, "cost", *wanted, "--since", "1d")["runs"]}
    for doc in docs:
        rid, containers = doc["run_id"], 2
        measured, billed_s = float(doc["cost"]["gpu_seconds"]), float(ledger[rid]["gpu_seconds"])
        estimate, billed = float(rows[rid]["estimate_usd"]), float(rows[rid]["billed_usd"])
        assert abs(measured - billed_s) <= 0.25 * billed_s + 0.5 * containers, (rid, measured, billed_s)
        assert abs(estimate - billed) <= 0.25 * billed + estimate / measured * 0.5 * containers, (
            rid, estimate, billed)  # fmt: skip


@pytest.mark.slow(12)
def test_acagpu_the_ledger_and_cost_management_bill_one_clock(served: Served) -> None:
    """Item F: for one `up --env` acagpu said 1.06 GPU-seconds, Cost Management ≈ 1 GPU-s and the
    ledger 51.35 (emulated seconds), and sandboxed `sh -c` shards were billed scaled. Every figure
    is now wall seconds (the clock of ARM's timestamps): the three agree, for simulated containers
    (up) and real processes (shards), within one look per container."""
    emu, home = served
    shell = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.2")  # the figures come from the streams
    up = _json(shell, "up", "--env", "lab", "--run-id", "one1", "--yes")
    ran = _run(shell, "run", "-o", "json", "--env", "lab", "--yes", "--run-id", "one2", "--shards", "2",
               IMAGE, "--", "sh", "-c", "sleep 1")  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = [r for r in _billing(emu)["replicas"] if r["run_id"] == "one2"]
    assert rows and all(r["lived"] == "real process" for r in rows), rows
    assert all(r["emulated_seconds"] == r["seconds"] for r in rows), rows  # real seconds, not scaled
    _three_figures(emu, shell, [up, json.loads(ran.stdout)])


def test_a_real_process_keeps_real_minutes(served: Served) -> None:
    """Item 8: `--max-minutes 3` stopped a `sh -c 'sleep 100'` after 1.8 real seconds (the replica
    timeout ran on the scaled clock). At time scale 0.02 two minutes are 2.4 wall s: a 3 s sleep
    under `--max-minutes 2` ends on its own, exit 0 (its pull still runs on the scaled clock)."""
    emu, home = served
    shell = _shell(emu, home, ACAGPU_POLLING_INTERVAL="0.2")
    done = _run(shell, "run", "--env", "lab", "--yes", "--run-id", "real1", "--max-minutes", "2", IMAGE,
                "--", "sh", "-c", "sleep 3; echo slept")  # fmt: skip
    assert done.returncode == 0, done.stderr[-1500:]
    assert "slept" in done.stdout + done.stderr
