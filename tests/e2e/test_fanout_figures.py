"""A fan-out's figures and words that tell the truth, against `acagpu emulator serve`
as a real process and the CLI as a subprocess; one emulator and one warm environment for the file.

The emulator's own billing (`/_emulator/billing`, each replica's wall seconds) judges the cost; its
inventory and the host's process table judge what a Ctrl-C leaves behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from aca_gpu.workflow.fanout.outcome import render_fanout
from tests.e2e.serving import emulator_get, emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SANDBOX = "busybox"  # not in Podman's storage: the emulator runs `sh -c` in its sandbox (sleep there)
LINE = re.compile(
    r"shards (\d+): queued (\d+) · starting (\d+) · running (\d+) · retrying (\d+) · "
    r"succeeded (\d+) · failed (\d+) \| (.+ GPU-seconds) ≈ (\S+) \|"
)


def _acagpu(shell: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _get(emu: dict[str, str], path: str) -> dict[str, Any]:
    return emulator_get(emu, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """(emulator, shell): one emulator and its warm environment `lab`, a user's default polling."""
    tmp = tmp_path_factory.mktemp("fanout-figures")
    with emulator_serve(tmp / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_CACHE_DIR": str(tmp / "cache")}
        shell.pop("ACAGPU_ENV", None)
        shell.pop("ACAGPU_POLLING_INTERVAL", None)  # the default looks, as a user runs it
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        yield emu, shell


@pytest.mark.slow(29)
def test_shards_cost_their_containers_life_and_the_line_counts_starting_apart(
    lab: tuple[dict[str, str], dict[str, str]],
) -> None:
    emu, shell = lab
    # 600 emulated minutes: the default 30 are 3.6 wall s at this time scale, which a busy machine's
    # start and a 2.1 s sleep can outlive
    done = _acagpu(shell, "run", "--env", "lab", "--yes", "--run-id", "fig1", "--shards", "9", "--parallel",
                   "3", "--max-minutes", "600", SANDBOX, "--", "sh", "-c", "sleep 2.1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = Path(shell["ACAGPU_CACHE_DIR"]) / "fanout" / "fig1.json"  # the run's document, kept
    doc = json.loads(record.read_text())["document"]
    billed = sum(
        r["wall_seconds"] * r["gpus"] for r in _get(emu, "billing")["replicas"] if r["run_id"] == "fig1"
    )
    # whole looks (2 s apart at the default polling) read a shard just over 2 s as 4 s, 2x the bill;
    # the middle of the looks and the endTime's second read +9 to +13 % here (+24 % beside a second
    # suite). Each shard's log stream is held open from its start, so its acceptance and its close
    # are the container's life, as for a single run: -1.5 to -1.8 % with another suite running, but
    # +8.0 % once with two suites on two cores, and +13 % with a third test beside them (shards 3 to
    # 10 % off each, while the client waited for the CPU to see a close). So the test bounds it
    # generously, well under the 2x of whole looks, and benchmarks/cost_agreement.py measures it
    assert abs(doc["cost"]["gpu_seconds"] - billed) <= 0.2 * billed, (doc["cost"], billed)
    assert all(s["gpu_seconds"] > 0 for s in doc["shards"])  # O2: every shard that ran costs something
    # O3: a line counts started-not-yet-running attempts apart; with shards waiting, P are under way
    lines = [m for m in map(LINE.search, done.stderr.splitlines()) if m]
    assert lines, done.stderr
    waiting = [m for m in lines if int(m.group(2)) > 0 and int(m.group(6)) > 0]
    assert waiting, done.stderr
    assert all(int(m.group(3)) + int(m.group(4)) == 3 for m in waiting), [m.group(0) for m in waiting]
    assert all(m.group(9) != "$0.0000" for m in lines if int(m.group(6)) > 0), [m.group(0) for m in lines]


def test_exits_at_once_cost_more_than_nothing_in_the_money_text(
    lab: tuple[dict[str, str], dict[str, str]],
) -> None:
    """O2: containers that exit at once still ran: `<$0.0001`-style text, never `$0.0000 for 0 GPU-s`."""
    _emu, shell = lab
    done = _acagpu(shell, "run", "--env", "lab", "--yes", "--shards", "3", "--parallel", "3", SANDBOX, "--",
                   "sh", "-c", "exit 0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    cost = next(line for line in done.stderr.splitlines() if "cost ≈" in line)
    assert "$0.0000" not in cost and " 0 GPU-s" not in cost, cost
    assert re.search(r"for <?\d+\.\d GPU-seconds", cost) and not re.search(r"for 0\.0 GPU", cost), cost


def test_ctrl_c_labels_running_shards_stopped_not_failed(lab: tuple[dict[str, str], dict[str, str]]) -> None:
    emu, shell = lab
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--env", "lab", "--yes", "-o", "json", "--shards", "6", "--parallel", "3",
         "--run-id", "figc", "--max-minutes", "600", SANDBOX, "--", "sh", "-c", "sleep 60"],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_get(emu, "inventory")["replicas"]) < 3:
        time.sleep(0.2)
    looked = time.monotonic()
    # a second shell sees the run going: 3 shards started, 3 queued behind them (the job says 6)
    watched = _acagpu(shell, "status", "-o", "json")
    assert watched.returncode == 0, watched.stderr
    (run,) = [r for r in json.loads(watched.stdout)["runs"] if r["run_id"] == "figc"]
    assert run["phase"] in ("starting", "running"), run
    shards = run["shards"]
    assert (shards["total"], shards["queued"], shards["starting"] + shards["running"]) == (6, 3, 3), run
    time.sleep(
        max(0.0, 1.5 - (time.monotonic() - looked))
    )  # the client has looked since: it knows them running
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    states = sorted(s["status"] for s in doc["shards"])
    assert states == ["cancelled"] * 3 + ["stopped"] * 3, (states, err)  # O4: not "failed"
    # the closing lines (the same document rendered) say what cancelled means, never "None"
    closing = render_fanout(doc)
    assert "None" not in closing and closing.count("never started (Ctrl-C came first)") == 3, closing
    assert doc["summary"]["failed"] == 0 and doc["summary"]["failed_indexes"] == [], doc["summary"]
    assert sorted(doc["summary"]["unfinished_indexes"]) == list(range(6))  # --rerun-failed runs them


def _faults(emu: dict[str, str], spec: str) -> None:
    answer = requests.put(
        f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/faults",
        data=spec,
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    )
    answer.raise_for_status()


def test_dry_run_plans_what_the_quota_lets_run_at_once_as_the_run_itself_would(
    lab: tuple[dict[str, str], dict[str, str]],
) -> None:
    """`--parallel 50` where 4 GPUs are free: the plan says 4 at once and 250 rounds, not 50 and 20,
    cold (the region's usages) and warm (the environment's), and nothing is created."""
    emu, shell = lab
    plan = ("--dry-run", "--shards", "1000", "--parallel", "50", SANDBOX, "--", "true")
    _faults(emu, "quota:region=eastus,profile=T4,limit=4")
    try:
        cold = _acagpu(shell, "run", "-o", "json", *plan)
        warm = _acagpu(shell, "run", "--env", "lab", *plan)
    finally:
        _faults(emu, "")
    assert cold.returncode == 0, cold.stderr
    doc = json.loads(cold.stdout)
    assert (doc["shards"]["parallel"], doc["fanout_price"]["rounds_at_parallel"]) == (4, 250), doc
    assert doc["shards"]["quota"]["said"].startswith("4 at once, not 50: region eastus has 4 of 4"), doc
    assert (doc["shards"]["quota"]["asked"], doc["shards"]["quota"]["parallel"]) == (50, 4)
    assert warm.returncode == 0, warm.stderr
    assert "at most 4 at once" in warm.stdout and "250 rounds" in warm.stdout, warm.stdout
    assert "GPU quota      4 at once, not 50: environment cae-acagpu-env-lab" in warm.stdout, warm.stdout
    assert not _get(emu, "inventory")["jobs"]  # a plan creates nothing
