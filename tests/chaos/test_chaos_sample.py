"""A seeded sample of benchmarks/chaos.py: real acagpu processes behind the chaos proxy keep the invariants.

Each seed is one scenario of the 200-scenario run (`python benchmarks/chaos.py --seed N -v` replays
it at the default speed). Here the emulator runs 10x faster, acagpu polls every 1.5 s and all seeds
run at once, so the sample stays small. The invariants: no Python traceback, no exit 5 on a healthy
GPU, nothing left in the emulator after a command (unless a second Ctrl-C printed the `down`
command), and every non-zero exit ends in one clear line.
"""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[2]
# seed: what it covers (flow; faults drawn by the seed)
SEEDS = {
    7: "kept run: up --keep, smi, exec, logs, test, down; exec websocket closed mid-stream",
    47: "kept run; PUT cut off mid-body; log/event stream cut mid-line",
    14: "up; PUT and POST (provider registration) cut off mid-body",
    87: "up; added latency; 404 on the GET right after the resource group PUT",
    1: "up with an image too new for the driver: exit 5 is the right answer",
    10: "validate 2 images x GPUs, one too new; 200 with an empty body",
    27: "down of a kept run; 429 with Retry-After as an HTTP date on operation polls",
    6: "reap --yes of expired runs (a live one stays); 429 with Retry-After in seconds",
    20: "up, SIGINT, a second SIGINT during the teardown; latency on the group PUT",
    56: "up, SIGINT early; repeated long-running-operation poll answers",
    1013: "run: numbered lines, exit 1, SIGINT; 429 on the execution's replica list",
    2003: "up --env beside a neighbour run in one warm environment; 5xx on execution reads and deletes",
}


def _load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("acagpu_chaos_bench", ROOT / "benchmarks" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


chaos = _load_runner()


# 10x the emulator's default speed; polls 1.5 s apart, still longer than a finished job replica lingers
# (the emulator's 0.5 s floor), as the default 5 s polls are at the default speed
# a step still running after 90 wall s is hung: the ten seeds run at once, so on a loaded two-core
# machine a healthy step takes several times what it takes on an idle one
SPEED = chaos.Speed(time_scale=0.002, poll=1.5, max_step_s=90)


def _problems(res: Any) -> list[str]:
    problems = [] if res.error is None else [f"runner: {res.error}"]
    for step in res.steps:
        where = f"{step.name} (exit {step.exit_code})"
        if step.traceback:
            problems.append(f"{where}: traceback")
        if step.exit5_on_healthy:
            problems.append(f"{where}: exit 5 on a healthy GPU")
        if step.leftovers and not step.leftover_allowed:
            problems.append(f"{where}: left {', '.join(step.leftovers)}")
        if step.timed_out:
            problems.append(f"{where}: still running at its deadline")
        if not step.clear:
            problems.append(f"{where}: no clear last line: {step.last_line!r}")
        if step.lines_problem:
            problems.append(f"{where}: {step.lines_problem}")
        if step.traceback or step.timed_out:  # what it said, for the next reader of a rare failure
            problems.append(f"{where}: its stderr ended:\n{step.err_tail}")
    return problems


@pytest.mark.slow(35)
def test_seeded_scenarios_keep_the_invariants() -> None:
    """All seeds at once (each has its own emulator and proxy): the sample costs its longest scenario."""
    with ThreadPoolExecutor(max_workers=len(SEEDS)) as pool:
        results = list(pool.map(lambda seed: chaos.run_scenario(seed, speed=SPEED), SEEDS))
    failures = []
    for res in results:
        problems = _problems(res)
        if problems:
            failures.append(
                f"seed {res.seed} ({SEEDS[res.seed]}; faults: {'; '.join(res.faults)}): "
                + " | ".join(problems)
            )
    assert not failures, f"{len(failures)} of {len(SEEDS)} scenarios broke an invariant:\n" + "\n".join(
        failures
    )
