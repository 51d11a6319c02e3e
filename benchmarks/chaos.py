"""Seeded fault-injection scenarios: real `acagpu` processes behind the chaos proxy, before a real emulator.

Each scenario starts `acagpu emulator serve` (default time scale, `--env-file`) and
`tests/chaos/proxy.py` in front of it, both on port 0, then runs acagpu commands as subprocesses with
`ACAGPU_ARM_ENDPOINT` / `ACAGPU_CA_BUNDLE` pointing at the proxy. The seed draws the flow and the
faults (issue 9, "Faults"), so one scenario can be re-run alone with `--seed`:

    up         `up --yes` (sometimes an image too new for the driver: exit 5 is then the right answer)
    kept       `up --keep`, `smi`, `exec -- nvidia-smi -L`, `logs --system`, `test`, `down`
    validate   2 images x 1-2 GPUs (`--no-inspect`; sometimes one image is too new)
    down       `down` of a run kept beforehand (the setup goes to the emulator directly, no faults)
    reap       `reap --yes` after expired runs (and one live run) were created directly
    sigint     `up` with SIGINT at a random moment, sometimes a second SIGINT during the teardown
    run        (seeds 1000-1999) `acagpu run` of a `sh -c` line printing numbered lines and exiting
               with a drawn code; sometimes SIGINT at a random moment (and a second one)
    warm       (seeds from 2000) `up --env` or `validate --env` beside a neighbour run in one warm
               environment, with faults and sometimes SIGINT
    fanout     (seeds from 4000) `acagpu run --env --shards N --parallel P` with the emulator's own
               platform faults (never placed, BackoffLimitExceeded, stalled pull, lost replica), one
               shard that may exit 3, the proxy's faults, sometimes SIGINT (`--fanout N` runs N)
    at-once    (seeds from 3000) `acagpu run`, cold or `--env` in an environment `env create` made,
               of a container that prints 1-20 numbered lines and exits at once, against an
               emulator that removes a finished replica and its log at once (`--faults
               linger:seconds=0`, the worst case: how long Azure keeps one is not established),
               with the usual faults and a log stream cut most of the time; no line may be lost,
               whatever acagpu says about it (`--at-once N` runs N of them)

A `run` command must exit with the container's code (or a documented acagpu code, or 130 after
SIGINT) and, when the container's code came back, show every numbered line exactly once, in order
(an at-once scenario with no excuse: the summary counts the runs that lost a line).
For every command it records the exit code, a Python traceback on stderr, whether the output ends
in one clear line, exit 5 on a healthy GPU, library noise on stderr, `-o json` giving exactly one
document with `schema` and `command`; after the command, whatever is left in the emulator's
`/_emulator/inventory` (a leftover after a second Ctrl-C is allowed only if the `down` command was
printed). Usage:

    python benchmarks/chaos.py                      # 200 scenarios, seeds 0..199
    python benchmarks/chaos.py --seed 17 -v         # one scenario, with its commands' output
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "tests" / "chaos" / "proxy.py"
HEALTHY_IMAGES = [
    "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
    "nvidia/cuda:12.4.1-base-ubuntu22.04",
    "nvidia/cuda:12.2.2-base-ubuntu22.04",
    "nvidia/cuda:11.8.0-base-ubuntu22.04",
]
TOO_NEW_IMAGE = "nvidia/cuda:13.0.0-base-ubuntu24.04"  # needs a newer driver than the emulated fleet's
KINDS = {"up": 0.22, "kept": 0.2, "validate": 0.18, "down": 0.12, "reap": 0.1, "sigint": 0.18}
RUN_SEEDS_FROM = 1000  # `acagpu run` scenarios; seeds below keep the flows they always drew
NUMBERED = re.compile(r"^line(\d+)$")
# Seeds from WARM_SEEDS on are warm-environment scenarios (drawn apart, so seeds below keep their
# scenarios): a neighbour run shares the environment while the faulted `up --env` runs, sometimes
# with Ctrl-C; afterwards neither run may leave anything and the environment must stand untouched.
WARM_SEEDS = 2000
AT_ONCE_SEEDS = 3000  # `run` of a container that prints and exits at once, no replica linger
AT_ONCE_ENV = "atonce"
FANOUT_SEEDS = 4000  # `run --shards` in a warm environment, platform faults on the emulator's side
WARM_ENV = "chaoslab"
FAULT_KINDS = [
    "throttle_seconds",
    "throttle_date",
    "5xx_arm",
    "5xx_none",
    "5xx_html",
    "reset_before",
    "reset_after",
    "truncate_get",
    "truncate_put",
    "truncate_post",
    "latency",
    "ws_close",
    "stream_cut",
    "lro_repeat",
    "empty_200",
    "non_json_200",
    "not_found_after_put",
]
ARM_PATHS = {
    "resource group": r"/resourcegroups/[^/]+$",
    "environment": r"/managedEnvironments/[^/]+$",
    "app": r"/containerApps/[^/]+$",
    "job": r"/jobs/[^/]+$",
    "job start": r"/jobs/[^/]+/start$",
    "executions": r"/executions",
    "replicas": r"/replicas$",
    "auth token": r"/getAuthToken$",
    "provider": r"/providers/Microsoft\.App(/register)?$",
    "profile offers": r"WorkloadProfileTypes",
    "usages": r"/usages$",
    "operation": r"operation(statuses|results)/",
    "group list": r"/resourcegroups$",
    "any": r"",
}
PUT_PATHS = ["resource group", "environment", "app", "job"]
POST_PATHS = ["job start", "auth token", "provider", "any"]
TRACEBACK = re.compile(r"^Traceback \(most recent call last\)|^\s+File \".*\", line \d+", re.MULTILINE)
NOISE = re.compile(
    r"^(WARNING|ERROR|INFO|DEBUG|CRITICAL)[: ]|Exception in thread|urllib3|azure\.core|"
    r"Retrying \(|Connection pool|^\w+(\.\w+)+Error: ",
    re.MULTILINE,
)
CAUGHT_CRASH = re.compile(r"error: unexpected\b")
STOP = threading.Event()  # Ctrl-C / SIGTERM: start no new scenario, end the running ones
SUMMARY = re.compile(
    r"^(run \S+: |\S+\s+(pass|fail|ok|skipped)\b|teardown: |reap: |nothing |no expired)", re.I
)


@dataclass
class Step:
    name: str
    argv: list[str]
    timeout: float
    json: bool = False
    sigint_at: float | None = None
    second_sigint_after: float | None = None
    too_new: bool = False  # exit 5 is the right answer (an image needs a newer driver)
    healthy_images: list[str] = field(default_factory=list)
    check_leftovers: bool = True
    container_exit: int | None = None  # `run`: the code the container exits with
    numbered_lines: int = 0  # `run`: lines line1..lineN it prints, each exactly once
    strict_lines: bool = False  # a lost line counts even when acagpu said it could not read it


@dataclass
class Scenario:
    seed: int
    kind: str
    steps: list[Step]
    rules: list[dict[str, Any]]
    faults: list[str]
    setup: str | None = None
    run_id: str = ""
    serve_faults: str = ""  # the emulator's own `--faults` (at-once: no replica linger)


@dataclass
class StepResult:
    name: str
    argv: list[str]
    exit_code: int | None
    seconds: float
    timed_out: bool
    traceback: bool
    clear: bool
    last_line: str
    noise: list[str]
    exit5_on_healthy: bool
    json_ok: bool | None
    json_problem: str
    leftovers: list[str]
    leftover_allowed: bool
    sigints: int
    # Ctrl-C while the interpreter was still starting, before any acagpu code ran (Python's own
    # KeyboardInterrupt from runpy/importlib, exit -2): nothing acagpu can catch or clean up
    before_start: bool = False
    container_exit: int | None = None  # `run`: the container's own code, an expected exit
    lines_problem: str = ""  # `run`: a numbered line lost, doubled or out of order
    lines_from: dict[str, int] = field(default_factory=dict)  # -o json: lines by source
    lines_lost_said: bool = False  # `run`: lines lost that acagpu said it could not read (excused)
    # -o json of a run that ended as expected, without Ctrl-C: the GPU-seconds it reported and
    # those the emulator billed for its run id (each replica's wall-clock life)
    gpu_seconds: float | None = None
    billed_gpu_seconds: float | None = None
    err_tail: str = ""  # the end of its stderr: what a failed invariant is read from


@dataclass
class ScenarioResult:
    seed: int
    kind: str
    faults: list[str]
    fired: list[str]
    steps: list[StepResult]
    verdict: str = ""
    flags: list[str] = field(default_factory=list)
    json_problems: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


# ---- drawing a scenario from its seed ---------------------------------------------------------


def _rule(rng: random.Random, kind: str, flow: str) -> tuple[dict[str, Any], str]:
    skip = rng.choice([0, 0, 1, 2, 3, 5])
    count = rng.choice([1, 1, 2, 3])
    targets = list(ARM_PATHS)
    if flow in ("down", "reap"):
        targets = ["resource group", "group list", "operation", "app", "job", "environment", "any"]
    where = rng.choice(targets)
    method = rng.choice(["*", "GET", "GET", "PUT", "POST", "DELETE"])
    if flow in ("down", "reap"):
        method = rng.choice(["*", "GET", "DELETE"])
    rule: dict[str, Any] = {"method": method, "path": ARM_PATHS[where], "count": count, "skip": skip}
    if kind.startswith("throttle"):
        fmt = "date" if kind.endswith("date") else "seconds"
        rule.update(fault="throttle", retry_after=rng.choice([1, 2, 3]), retry_after_format=fmt)
    elif kind.startswith("5xx"):
        rule.update(fault="status", status=rng.choice([500, 502, 503, 504]), body=kind.split("_")[1])
    elif kind.startswith("reset"):
        rule.update(fault="reset", when=kind.split("_")[1])
    elif kind.startswith("truncate"):
        method = kind.split("_")[1].upper()
        if method == "PUT":
            where = rng.choice(PUT_PATHS)
        elif method == "POST":
            where = rng.choice(POST_PATHS)
        rule.update(fault="truncate", method=method, path=ARM_PATHS[where])
    elif kind == "latency":
        rule.update(fault="latency", seconds=rng.choice([1, 2, 4, 8]), count=rng.choice([1, 3, 6]))
    elif kind == "ws_close":
        where = "exec websocket"
        rule.update(
            fault="ws_close",
            method="GET",
            path=r"/exec$",
            after_messages=rng.choice([0, 1, 2, 3]),
            mode=rng.choice(["abort", "close"]),
        )
    elif kind == "stream_cut":
        where = "log stream"
        rule.update(
            fault="stream_cut",
            method="GET",
            path=r"/(logstream|eventstream)$",
            after_lines=rng.choice([0, 1, 3, 8]),
        )
    elif kind == "lro_repeat":
        where = "operation"
        rule.update(fault="lro_repeat", method="GET", path=ARM_PATHS[where], count=rng.choice([1, 2, 4]))
    elif kind in ("empty_200", "non_json_200"):
        rule.update(fault=kind, when=rng.choice(["before", "after"]))
    elif kind == "not_found_after_put":
        where = rng.choice(PUT_PATHS)
        rule.update(fault=kind, method="PUT", path=ARM_PATHS[where], gets=rng.choice([1, 2, 3]))
    if rule["method"] == "PUT":
        rule["skip"] = skip = min(skip, 1)  # a run PUTs each resource about once
    label = f"{kind}@{rule['method']} {where}" + (f" skip={skip}" if skip else "") + f" x{rule['count']}"
    return rule, label


def draw_run(seed: int) -> Scenario:
    """An `acagpu run` scenario: numbered lines, a drawn exit code, faults, sometimes SIGINT."""
    rng = random.Random(seed)
    as_json = rng.random() < 0.4
    run_id = f"r{seed:04d}{rng.choice('abcdefghjk')}"
    picks = rng.sample(FAULT_KINDS, rng.choice([1, 1, 2, 3]))
    rules, labels = [], []
    for k in picks:
        rule, label = _rule(rng, k, "run")
        rules.append(rule)
        labels.append(label)
    lines, code = rng.choice([3, 20, 200]), rng.choice([0, 0, 1, 3, 42])
    script = f"i=1; while [ $i -le {lines} ]; do echo line$i; i=$((i+1)); done; echo done >&2; exit {code}"
    argv = ["run", "--yes", "--run-id", run_id, *(["-o", "json"] if as_json else []), "busybox", "--"]
    step = Step("run", [*argv, "sh", "-c", script], 180, as_json, container_exit=code, numbered_lines=lines)
    if rng.random() < 0.3:
        step.sigint_at = rng.uniform(0.5, 20.0)
        step.second_sigint_after = rng.uniform(0.3, 4.0) if rng.random() < 0.35 else None
        labels.append(f"SIGINT@{step.sigint_at:.1f}s")
    return Scenario(seed, "run", [step], rules, labels, None, run_id)


def draw_at_once(seed: int) -> Scenario:
    """`acagpu run` of a container that prints numbered lines and exits at once, cold or warm, with
    no replica linger and (most of the time) a log stream cut among the faults."""
    rng = random.Random(seed)
    warm = rng.random() < 0.5
    as_json = rng.random() < 0.6
    run_id = f"a{seed:04d}{rng.choice('abcdefghjk')}"
    picks = rng.sample(FAULT_KINDS, rng.choice([0, 1, 1, 2]))
    if rng.random() < 0.7 and "stream_cut" not in picks:
        picks.append("stream_cut")
    rules, labels = [], []
    for k in picks:
        rule, label = _rule(rng, k, "run")
        if k == "stream_cut":
            rule["path"] = r"/logstream$"
            rule["count"] = rng.choice([1, 2, 0])  # 0: every connection
            label = f"stream_cut@logstream after={rule['after_lines']} x{rule['count'] or 'all'}"
        rules.append(rule)
        labels.append(label)
    lines, code = rng.choice([1, 3, 20]), rng.choice([0, 1, 3, 42])
    script = f"i=1; while [ $i -le {lines} ]; do echo line$i; i=$((i+1)); done; exit {code}"
    place = ["--env", AT_ONCE_ENV] if warm else []
    argv = ["run", "--yes", "--run-id", run_id, *place, *(["-o", "json"] if as_json else []), "busybox", "--"]
    step = Step("run", [*argv, "sh", "-c", script], 420, as_json, container_exit=code, numbered_lines=lines)
    step.strict_lines = True
    labels.insert(0, "warm" if warm else "cold")
    setup = "at-once env" if warm else None
    return Scenario(seed, "at-once", [step], rules, labels, setup, run_id, serve_faults="linger:seconds=0")


def draw_fanout(seed: int) -> Scenario:
    """`acagpu run --env --shards N --parallel P`: the proxy's faults in front, the emulator's own
    platform faults behind (never placed, BackoffLimitExceeded, a stalled pull, a lost replica),
    one shard that may exit 3, sometimes Ctrl-C. Exit: 0, or 1 when the bad shard ran (its own
    failure), or 130 after Ctrl-C; never a traceback, one clear last line, nothing left behind."""
    rng = random.Random(seed)
    as_json = rng.random() < 0.5
    run_id = f"f{seed:04d}{rng.choice('abcdefghjk')}"
    picks = rng.sample(FAULT_KINDS, rng.choice([0, 1, 1, 2]))
    rules, labels = [], []
    for k in picks:
        rule, label = _rule(rng, k, "run")
        rules.append(rule)
        labels.append(label)
    shards, parallel = rng.choice([4, 8, 12]), rng.choice([2, 3, 4])
    bad = rng.choice([None, None, rng.randrange(shards)])
    fail = f'[ "$ACAGPU_SHARD_INDEX" != {bad} ] || exit 3; ' if bad is not None else ""
    script = f"echo shard$ACAGPU_SHARD_INDEX; {fail}exit 0"
    argv = ["run", "--yes", "--run-id", run_id, "--env", AT_ONCE_ENV, "--shards", str(shards),
            "--parallel", str(parallel), "--start-timeout", "15s", *(["-o", "json"] if as_json else []),
            "busybox", "--", "sh", "-c", script]  # fmt: skip
    step = Step("fanout", argv, 420, as_json, container_exit=1 if bad is not None else 0)
    if rng.random() < 0.25:
        step.sigint_at = rng.uniform(1.0, 15.0)
        labels.append(f"SIGINT@{step.sigint_at:.1f}s")
    platform = f"stuck:rate=0.1;backoff:rate=0.1;lost:rate=0.05;pull_stall:rate=0.05;seed={seed}"
    labels.insert(0, f"{shards} shards at {parallel}" + (f", shard {bad} exits 3" if bad is not None else ""))
    return Scenario(seed, "fanout", [step], rules, labels, "at-once env", run_id, serve_faults=platform)


UNREADABLE = ("no log line could be read", "the log may be incomplete")


def numbered_problem(step: Step, rc: int | None, out: str, err: str, *, interrupted: bool = False) -> str:
    """When the container's code came back, its numbered lines must all be there once, in order,
    unless acagpu said the log could not be read (ACA drops a finished replica's log in seconds).
    A Ctrl-C that landed before acagpu started brought no code back: CPython's own start-up failure
    exits 1, which a container's code of 1 only looks like."""
    if not step.numbered_lines or rc != step.container_exit:
        return ""
    if interrupted and interrupted_before_start(rc, out, err):
        return ""
    text, said = out, err
    if step.json:
        try:
            output = json.loads(out)["output"]
            text, said = str(output["stdout"]), " ".join(output.get("notes", []))
        except (ValueError, KeyError, TypeError):
            return "no output in the JSON document"
    seen = [int(m.group(1)) for m in map(NUMBERED.match, text.splitlines()) if m]
    wanted = list(range(1, step.numbered_lines + 1))
    if seen == wanted:
        return ""
    doubled = sorted({n for n in seen if seen.count(n) > 1})
    in_order = seen == sorted(set(seen))
    if not doubled and in_order and any(u in said for u in UNREADABLE) and not step.strict_lines:
        return ""  # lost lines that acagpu said it could not read: the platform's limit, stated
    missing = sorted(set(wanted) - set(seen))
    return f"lines: {len(seen)} of {len(wanted)}; missing {missing[:5]}; doubled {doubled[:5]}"


def _draw_warm(seed: int, rng: random.Random) -> Scenario:
    """`up --env` (or `validate --env`) beside a neighbour run in one warm environment."""
    as_json = rng.random() < 0.4
    out = ["-o", "json"] if as_json else []
    run_id = f"w{seed:04d}{rng.choice('abcdefghjk')}"
    allowed = [k for k in FAULT_KINDS if k not in ("ws_close", "not_found_after_put")]
    rules, labels = [], []
    for k in rng.sample(allowed, rng.choice([1, 1, 2])):
        rule, label = _rule(rng, k, "up")
        rules.append(rule)
        labels.append(label)
    if rng.random() < 0.3:
        images = rng.sample(HEALTHY_IMAGES, 2)
        argv = ["validate", "--yes", "--no-inspect", "--env", WARM_ENV, "--run-id", run_id, *out]
        for image in images:
            argv += ["--image", image]
        argv += ["--gpu", "t4"]
        step = Step("validate --env", argv, 240, as_json, healthy_images=images)
    else:
        argv = [
            "up",
            "--yes",
            "--env",
            WARM_ENV,
            "--gpu",
            rng.choice(["t4", "a100"]),
            "--run-id",
            run_id,
            *out,
        ]
        step = Step("up --env", argv, 240, as_json)
    if rng.random() < 0.3:
        step.sigint_at = rng.uniform(0.5, 12.0)
        step.second_sigint_after = rng.uniform(0.3, 3.0) if rng.random() < 0.3 else None
        labels.append(f"SIGINT@{step.sigint_at:.1f}s")
    return Scenario(seed, "warm", [step], rules, labels, "warm env", run_id)


def draw(seed: int) -> Scenario:
    """The scenario of one seed: the same seed gives the same flow, arguments and faults."""
    rng = random.Random(seed)
    if seed >= FANOUT_SEEDS:
        return draw_fanout(seed)
    if seed >= AT_ONCE_SEEDS:
        return draw_at_once(seed)
    if seed >= WARM_SEEDS:
        return _draw_warm(seed, rng)
    if seed >= RUN_SEEDS_FROM:
        return draw_run(seed)
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    as_json = rng.random() < 0.4
    out = ["-o", "json"] if as_json else []
    run_id = f"c{seed:04d}{rng.choice('abcdefghjk')}"
    gpu = rng.choice(["t4", "t4", "a100"])
    allowed = FAULT_KINDS
    if kind in ("down", "reap"):
        allowed = [
            k for k in FAULT_KINDS if k not in ("ws_close", "stream_cut", "truncate_put", "truncate_post")
        ]
        allowed = [k for k in allowed if k != "not_found_after_put"]
    picks = rng.sample(allowed, rng.choice([1, 1, 2, 3]))
    rules, labels = [], []
    for k in picks:
        rule, label = _rule(rng, k, kind)
        rules.append(rule)
        labels.append(label)
    steps: list[Step] = []
    setup = None
    if kind == "up":
        too_new = rng.random() < 0.1
        image = TOO_NEW_IMAGE if too_new else rng.choice(HEALTHY_IMAGES)
        argv = ["up", "--yes", "--gpu", gpu, "--image", image, "--run-id", run_id, *out]
        # the bar for a too-new image is an exit 5 within a minute: give it two
        steps.append(Step("up", argv, 120 if too_new else 240, as_json, too_new=too_new))
    elif kind == "kept":
        rid = ["--run-id", run_id]
        steps += [
            Step(
                "up --keep",
                ["up", "--yes", "--keep", "--gpu", gpu, *rid, *out],
                240,
                as_json,
                check_leftovers=False,
            ),
            Step("smi", ["smi", *rid, *out], 120, as_json, check_leftovers=False),
            Step("exec", ["exec", *rid, *out, "--", "nvidia-smi", "-L"], 120, as_json, check_leftovers=False),
            Step("logs", ["logs", *rid, "--system", *out], 90, as_json, check_leftovers=False),
            Step("test", ["test", *rid, *out], 180, as_json, check_leftovers=False),
            Step("down", ["down", *rid, "--yes", *out], 150, as_json),
        ]
    elif kind == "validate":
        images = rng.sample(HEALTHY_IMAGES, 2)
        too_new = rng.random() < 0.25
        if too_new:
            images[1] = TOO_NEW_IMAGE
        gpus = rng.sample(["t4", "a100"], rng.choice([1, 2]))
        argv = ["validate", "--yes", "--no-inspect", "--run-id", run_id, *out]
        for image in images:
            argv += ["--image", image]
        for g in gpus:
            argv += ["--gpu", g]
        healthy = [i for i in images if i != TOO_NEW_IMAGE]
        steps.append(Step("validate", argv, 240, as_json, too_new=too_new, healthy_images=healthy))
    elif kind == "down":
        setup = "kept run"
        steps.append(Step("down", ["down", "--run-id", run_id, "--yes", *out], 150, as_json))
    elif kind == "reap":
        setup = "expired runs"
        steps.append(Step("reap", ["reap", "--yes", *out], 150, as_json))
    else:
        at = rng.uniform(0.5, 32.0)
        second = rng.uniform(0.3, 4.0) if rng.random() < 0.35 else None
        argv = ["up", "--yes", "--gpu", gpu, "--run-id", run_id, *out]
        steps.append(Step("up + SIGINT", argv, 180, as_json, sigint_at=at, second_sigint_after=second))
        labels.append(f"SIGINT@{at:.1f}s" + (f" +2nd@{second:.1f}s" if second is not None else ""))
    return Scenario(seed, kind, steps, rules, labels, setup, run_id)


# ---- one scenario's world: emulator + proxy ---------------------------------------------------


@dataclass(frozen=True)
class Speed:
    """Defaults (None) are acagpu's and the emulator's own; the pytest sample runs faster."""

    time_scale: float | None = None
    poll: float | None = None
    max_step_s: float | None = None  # a cap on every command's deadline

    def moment(self, seconds: float) -> float:
        """A SIGINT moment drawn for the default time scale, moved to this one."""
        if self.time_scale is None:
            return seconds
        return 0.3 + seconds * min(1.0, max(0.1, self.time_scale / 0.02))


class World:
    """`acagpu emulator serve` and the proxy in front of it, in a scratch directory."""

    def __init__(
        self,
        acagpu: list[str],
        workdir: Path,
        rules: list[dict[str, Any]],
        seed: int,
        speed: Speed | None = None,
        serve_faults: str = "",
    ) -> None:
        self.speed = speed or Speed()
        self.acagpu = acagpu
        self.dir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        (workdir / "config.toml").write_text("# empty: settings come from the environment\n")
        env_file = workdir / "emulator.env"
        serve = [*acagpu, "emulator", "serve", "--env-file", str(env_file)]
        if self.speed.time_scale is not None:
            serve += ["--time-scale", str(self.speed.time_scale)]
        if serve_faults:
            serve += ["--faults", serve_faults]
        self.emulator = self._spawn(serve, "emulator")
        self.emu = _wait_env_file(env_file, self.emulator)
        (workdir / "rules.json").write_text(json.dumps({"seed": seed, "rules": rules}))
        ready = workdir / "proxy.json"
        self.faults_log = workdir / "faults.jsonl"
        self.proxy = self._spawn(
            [
                sys.executable,
                str(PROXY),
                "--upstream",
                self.emu["ACAGPU_ARM_ENDPOINT"],
                "--upstream-ca",
                self.emu["ACAGPU_CA_BUNDLE"],
                "--rules",
                str(workdir / "rules.json"),
                "--log",
                str(self.faults_log),
                "--ready-file",
                str(ready),
            ],
            "proxy",
        )
        deadline = time.monotonic() + 60
        while not ready.exists():
            if self.proxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the chaos proxy did not start: " + (workdir / "proxy.err").read_text()[-500:]
                )
            time.sleep(0.05)
        self.px = json.loads(ready.read_text())

    def _spawn(self, argv: list[str], name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            stdout=(self.dir / f"{name}.out").open("wb"),
            stderr=(self.dir / f"{name}.err").open("wb"),
            env=_base_env(self.dir),
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def env(self, *, direct: bool = False) -> dict[str, str]:
        env = _base_env(self.dir)
        env.update(self.emu)
        if not direct:
            env["ACAGPU_ARM_ENDPOINT"] = self.px["endpoint"]
            env["ACAGPU_CA_BUNDLE"] = self.px["ca_bundle"]
        if self.speed.poll is not None:
            env["ACAGPU_POLLING_INTERVAL"] = str(self.speed.poll)
        return env

    def _emulator_get(self, route: str) -> Any:
        resp = requests.get(
            f"{self.emu['ACAGPU_ARM_ENDPOINT']}/_emulator/{route}",
            headers={"Authorization": f"Bearer {self.emu['ACAGPU_TOKEN']}"},
            verify=self.emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        )
        resp.raise_for_status()
        return resp.json()

    def inventory(self) -> dict[str, Any]:
        doc: dict[str, Any] = self._emulator_get("inventory")
        return doc

    def arm_put(self, path: str, body: dict[str, Any], api_version: str) -> None:
        resp = requests.put(
            f"{self.emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{self.emu['ACAGPU_SUBSCRIPTION']}{path}",
            params={"api-version": api_version},
            json=body,
            headers={"Authorization": f"Bearer {self.emu['ACAGPU_TOKEN']}"},
            verify=self.emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        )
        resp.raise_for_status()

    def arm_post(self, path: str, api_version: str) -> None:
        resp = requests.post(
            f"{self.emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{self.emu['ACAGPU_SUBSCRIPTION']}{path}",
            params={"api-version": api_version},
            headers={"Authorization": f"Bearer {self.emu['ACAGPU_TOKEN']}"},
            verify=self.emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        )
        resp.raise_for_status()

    def fired(self) -> list[str]:
        if not self.faults_log.exists():
            return []
        out = []
        for line in self.faults_log.read_text().splitlines():
            e = json.loads(line)
            out.append(f"{e['fault']} {e['method']} {e['path'].rsplit('/', 2)[-2:][-1]}")
        return out

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def _base_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGPU_", "AZURE_", "GITHUB_"))}
    env["ACAGPU_CACHE_DIR"] = str(workdir / "cache")
    env["ACAGPU_CONFIG"] = str(workdir / "config.toml")
    env["ACAGPU_PRICES_URL"] = "https://127.0.0.1:9/prices"  # nothing leaves this machine
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "120"
    return env


def _wait_env_file(path: Path, proc: subprocess.Popen[bytes]) -> dict[str, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text()
            pairs = dict(re.findall(r"^export (\w+)=(\S+)$", text, re.MULTILINE))
            if len(pairs) >= 4:
                return {k: v.strip("'") for k, v in pairs.items()}
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("the emulator did not write its env file")


# ---- setups that go to the emulator directly (no faults) --------------------------------------


def setup_kept_run(world: World, run_id: str) -> None:
    proc = subprocess.run(
        [*world.acagpu, "up", "--yes", "--keep", "--run-id", run_id],
        env=world.env(direct=True),
        capture_output=True,
        timeout=240,
        check=False,
    )
    inv = world.inventory()
    if not any(g["name"] == f"rg-acagpu-{run_id}" for g in inv["resource_groups"]):
        raise RuntimeError(f"setup `up --keep` left no run (exit {proc.returncode})")


def setup_warm_env(world: World) -> subprocess.Popen[bytes]:
    """The shared environment (made directly, not through the proxy) and a neighbour run in it."""
    made = subprocess.run(
        [*world.acagpu, "env", "create", WARM_ENV, "--gpu", "t4,a100", "--yes"],
        env=world.env(direct=True),
        capture_output=True,
        timeout=240,
        check=False,
    )
    if made.returncode != 0:
        raise RuntimeError(f"setup `env create` failed (exit {made.returncode}): {made.stderr[-300:]!r}")
    return subprocess.Popen(
        # on A100, so the faulted run's T4 pairs and the neighbour never compete for the GPU quota
        [*world.acagpu, "up", "--yes", "--env", WARM_ENV, "--gpu", "a100", "--run-id", "live1"],
        env=world.env(direct=True),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def setup_at_once_env(world: World) -> None:
    """`env create` (directly, not through the proxy): its runs' console lines go to Log Analytics."""
    made = subprocess.run(
        [*world.acagpu, "env", "create", AT_ONCE_ENV, "--gpu", "t4", "--yes"],
        env=world.env(direct=True),
        capture_output=True,
        timeout=240,
        check=False,
    )
    if made.returncode != 0:
        raise RuntimeError(f"setup `env create` failed (exit {made.returncode}): {made.stderr[-300:]!r}")


def check_warm_env(world: World, neighbour: subprocess.Popen[bytes]) -> str | None:
    """The neighbour run passed, and the environment stands (not deleting), with nothing inside."""
    try:
        _, err = neighbour.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        neighbour.kill()
        return "the neighbour run in the warm environment did not finish"
    if neighbour.returncode != 0:
        return f"the neighbour run failed (exit {neighbour.returncode}): {err.decode()[-300:]!r}"
    inv = world.inventory()
    group = f"rg-acagpu-env-{WARM_ENV}"
    if not any(g["name"] == group and not g["deleting"] for g in inv["resource_groups"]):
        return "the warm environment's group was deleted"
    if not any(e["resource_group"] == group and e["state"] == "Succeeded" for e in inv["environments"]):
        return "the warm environment itself is gone or not ready"
    live = [f"{k[:-1]} {i['name']}" for k in ("apps", "jobs") for i in inv[k] if not i["deleting"]]
    return f"left inside the warm environment: {', '.join(live)}" if live else None


def setup_expired_runs(world: World, rng: random.Random) -> list[str]:
    """1-2 expired runs (group + GPU environment) and one live kept run; returns the expired groups."""
    now = datetime.now(UTC)
    expired = []
    world.arm_post("/providers/Microsoft.App/register", "2024-03-01")
    for i in range(rng.choice([1, 2])):
        name = f"rg-acagpu-exp{i}"
        created = now - timedelta(hours=5)
        tags = {
            "acagpu:managed": "true",
            "acagpu:run-id": f"exp{i}",
            "acagpu:created-at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "acagpu:expires-at": (created + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "acagpu:owner": "chaos@example.com",
        }
        world.arm_put(f"/resourcegroups/{name}", {"location": "eastus", "tags": tags}, "2024-03-01")
        env = {
            "location": "eastus",
            "tags": tags,
            "properties": {
                "workloadProfiles": [
                    {"name": "Consumption", "workloadProfileType": "Consumption"},
                    {"name": "gpu", "workloadProfileType": "Consumption-GPU-NC8as-T4"},
                ]
            },
        }
        env_path = f"/resourceGroups/{name}/providers/Microsoft.App/managedEnvironments/cae-acagpu-exp{i}"
        deadline = time.monotonic() + 60
        while True:  # the provider registration takes a few seconds
            try:
                world.arm_put(env_path, env, "2026-07-01")
                break
            except requests.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        expired.append(name)
    live = {
        "acagpu:managed": "true",
        "acagpu:run-id": "live0",
        "acagpu:created-at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "acagpu:expires-at": (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    world.arm_put("/resourcegroups/rg-acagpu-live0", {"location": "eastus", "tags": live}, "2024-03-01")
    return expired


# ---- judging one command ----------------------------------------------------------------------


def leftovers(inv: dict[str, Any], keep: set[str]) -> list[str]:
    """What still bills or still stands (a group whose delete was accepted is on its way out)."""
    left = []
    for g in inv["resource_groups"]:
        if not g["deleting"] and g["name"] not in keep:
            left.append(f"group {g['name']}")
    gone_groups = {g["name"].lower() for g in inv["resource_groups"] if g["deleting"]} | {
        k.lower() for k in keep
    }
    for kind in ("apps", "jobs"):
        for item in inv[kind]:
            if not item["deleting"] and item["resource_group"].lower() not in gone_groups:
                left.append(f"{kind[:-1]} {item['name']}")
    for r in inv["replicas"]:
        owner_parts = str(r["owner"]).split("-")
        if r["phase"] in ("Running", "Pending", "AssigningReplica") and not any(
            part.startswith("live") for part in owner_parts
        ):
            left.append(f"replica {r['name']} ({r['phase']})")
    return left


def _last_meaningful(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.lstrip().startswith("hint:") and "acagpu down" not in ln]
    return lines[-1].strip() if lines else ""


# what CPython itself prints when a SIGINT lands while the interpreter is still initialising (exit 1)
PYTHON_INIT_FAILURES = ("Fatal Python error: init_", "Could not import runpy module")


def interrupted_before_start(rc: int | None, out: str, err: str) -> bool:
    """A SIGINT that landed before Python ran any of acagpu: its traceback names no acagpu frame
    (runpy, importlib, site), ends in KeyboardInterrupt, and the process died of the signal, or,
    during the interpreter's own initialisation, CPython said so first and exited 1."""
    text = err.strip()
    if rc == -2 and not out.strip() and not text:
        # killed by the signal itself, silently: its default action was still in place, which only
        # holds before the interpreter installs its own handler (a busy machine's slow start)
        return True
    head = next(iter(text.splitlines()), "")
    during_init = rc == 1 and head.startswith(PYTHON_INIT_FAILURES)
    return (
        (rc in (-2, 130) or during_init)
        and not out.strip()
        and (text.startswith("Traceback (most recent call last)") or during_init)
        and text.endswith("KeyboardInterrupt")
        and "aca_gpu" not in text
    )


def judge(step: Step, rc: int | None, out: str, err: str, *, interrupted: bool = False) -> dict[str, Any]:
    """Traceback, noise, one clear line, exit 5 on a healthy GPU, the JSON document."""
    if interrupted and interrupted_before_start(rc, out, err):
        return {
            "traceback": False,
            "clear": True,
            "last_line": "KeyboardInterrupt before acagpu started",
            "noise": [],
            "exit5_on_healthy": False,
            "json_ok": None,
            "json_problem": "",
            "before_start": True,
        }
    traceback = bool(TRACEBACK.search(err) or TRACEBACK.search(out))
    noise = [m.group(0) for m in NOISE.finditer(err)][:3]
    last_err = _last_meaningful(err)
    doc: Any = None
    json_ok: bool | None = None
    json_problem = ""
    if step.json:
        try:
            doc = json.loads(out)
            missing = [k for k in ("schema", "command") if not isinstance(doc, dict) or k not in doc]
            json_problem = f"no {' or '.join(missing)}" if missing else ""
        except ValueError:
            json_problem = "not exactly one JSON document" if out.strip() else "no JSON document"
        json_ok = not json_problem
    if rc == 0 or (step.container_exit is not None and rc == step.container_exit):
        clear = True  # `run`: the container's own code, like `docker run`, needs no line of acagpu's
    elif last_err.startswith("error:"):
        # "unexpected (failure:) SomeError: ..." is a caught crash, not a statement of what went wrong
        clear = not CAUGHT_CRASH.match(last_err)
    elif step.json:
        error = doc.get("error") if isinstance(doc, dict) else None
        clear = bool(json_ok and isinstance(error, dict) and error.get("message"))
    else:
        clear = any(SUMMARY.match(ln.strip()) for ln in out.splitlines()[-12:]) and not noise
    exit5_on_healthy = False
    if rc == 5:
        if not step.too_new:
            exit5_on_healthy = True
        elif step.healthy_images:
            exit5_on_healthy = _healthy_image_failed(step.healthy_images, out, doc)
    last_line = last_err or (out.strip().splitlines()[-1] if out.strip() else "")
    return {
        "traceback": traceback,
        "clear": clear and not traceback,
        "last_line": last_line[:240],
        "noise": noise,
        "exit5_on_healthy": exit5_on_healthy,
        "json_ok": json_ok,
        "json_problem": json_problem,
    }


def _healthy_image_failed(healthy: list[str], out: str, doc: Any) -> bool:
    if isinstance(doc, dict):
        for row in doc.get("results") or doc.get("pairs") or []:
            if isinstance(row, dict) and any(h in json.dumps(row) for h in healthy):
                # "error" (result unavailable, transport) is not a verdict on the GPU; "fail" is
                status = str(row.get("status") or row.get("verdict") or "").lower()
                if status in ("fail", "failed"):
                    return True
        return False
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in healthy and parts[1].lower() == "fail":
            return True
    return False


def run_step(world: World, step: Step, keep: set[str], verbose: bool) -> StepResult:
    started = time.monotonic()
    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        proc = subprocess.Popen([*world.acagpu, *step.argv], stdout=fout, stderr=ferr, env=world.env())
        sigints = 0
        timed_out = False
        deadline = started + step.timeout
        next_signal = started + step.sigint_at if step.sigint_at is not None else None
        while proc.poll() is None:
            now = time.monotonic()
            if STOP.is_set():
                deadline = now - 1
            if next_signal is not None and now >= next_signal:
                proc.send_signal(signal.SIGINT)
                sigints += 1
                after = step.second_sigint_after if sigints == 1 else None
                next_signal = now + after if after is not None else None
            if now > deadline:
                timed_out = True
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=45)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                break
            time.sleep(0.05)
        rc = proc.returncode
        fout.seek(0)
        ferr.seek(0)
        out = fout.read().decode("utf-8", "replace")
        err = ferr.read().decode("utf-8", "replace")
    tag = re.sub(r"\W+", "-", step.name)
    (world.dir / f"step-{tag}.out").write_text(out)
    (world.dir / f"step-{tag}.err").write_text(err)
    seconds = time.monotonic() - started
    verdict = judge(step, rc, out, err, interrupted=sigints > 0)
    left = leftovers(world.inventory(), keep) if step.check_leftovers else []
    measured, billed = _spend(world, step, rc, out) if sigints == 0 else (None, None)
    allowed = sigints >= 2 and "acagpu down" in (out + err)
    if verbose:
        print(f"--- {' '.join(step.argv)} -> {rc} in {seconds:.1f}s sigints={sigints}", file=sys.stderr)
        print(err[-3000:], file=sys.stderr)
        print(out[-2000:], file=sys.stderr)
    return StepResult(
        name=step.name,
        argv=step.argv,
        container_exit=step.container_exit,
        lines_problem=numbered_problem(step, rc, out, err, interrupted=sigints > 0),
        lines_from=_lines_from(step, out),
        lines_lost_said=bool(
            numbered_problem(replace(step, strict_lines=True), rc, out, err, interrupted=sigints > 0)
        )
        and not numbered_problem(step, rc, out, err, interrupted=sigints > 0),
        exit_code=rc,
        seconds=round(seconds, 2),
        timed_out=timed_out,
        leftovers=left,
        leftover_allowed=bool(left) and allowed,
        sigints=sigints,
        gpu_seconds=measured,
        billed_gpu_seconds=billed,
        err_tail=err[-2500:],
        **verdict,
    )


def _spend(world: World, step: Step, rc: int | None, out: str) -> tuple[float | None, float | None]:
    """(reported, billed) GPU-seconds of a -o json run that ended as it should."""
    if not step.json or rc not in (0, step.container_exit):
        return None, None
    try:
        doc = json.loads(out)
        run_id, measured = str(doc["run_id"]), float(doc["cost"]["gpu_seconds"])
    except (ValueError, KeyError, TypeError):
        return None, None
    try:
        rows = world._emulator_get("billing")["replicas"]
    except Exception:
        return measured, None
    billed = sum(r["wall_seconds"] * r["gpus"] for r in rows if r.get("run_id") == run_id)
    return measured, billed


def _lines_from(step: Step, out: str) -> dict[str, int]:
    """-o json: how many of the container's lines came from each source (stream, log-analytics)."""
    if not step.json or not step.numbered_lines:
        return {}
    try:
        sources = json.loads(out)["output"].get("sources") or {}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {str(k): int(v) for k, v in sources.items()}


def _expected_exit(s: StepResult) -> bool:
    """0 (or the container's own code for `run`); 5 for an image the driver cannot run; 130 after Ctrl-C."""
    return (
        s.exit_code == 0
        or (s.container_exit is not None and s.exit_code == s.container_exit)
        or (s.exit_code == 5 and not s.exit5_on_healthy)
        or (s.sigints > 0 and s.exit_code == 130)
        or (s.sigints > 0 and s.before_start)
    )


def classify(res: ScenarioResult) -> None:
    flags = set()
    for s in res.steps:
        if s.traceback:
            flags.add("traceback")
        if s.exit5_on_healthy:
            flags.add("exit5_on_healthy")
        if s.leftovers and not s.leftover_allowed:
            flags.add("leftovers")
        if s.timed_out:
            flags.add("hung")
        if s.json_ok is False:
            flags.add("bad_json")
            res.json_problems.append(f"{s.name}: {s.json_problem}")
        if s.noise:
            flags.add("noise")
        if s.lines_problem:
            flags.add("lines")
        if not s.clear:
            flags.add("unclear")
    if res.error:
        flags.add("runner_error")
    res.flags = sorted(flags)
    if "traceback" in flags:
        res.verdict = "traceback"
    elif flags & {"unclear", "hung", "noise", "bad_json", "runner_error", "lines"}:
        res.verdict = "unclear"
    elif any(not _expected_exit(s) for s in res.steps):
        res.verdict = "clear error"
    else:
        res.verdict = "ok"


def run_scenario(
    seed: int,
    acagpu: list[str] | None = None,
    keep_dirs: bool = False,
    verbose: bool = False,
    speed: Speed | None = None,
) -> ScenarioResult:
    """Draw the seed's scenario, run it in a fresh emulator + proxy, judge every command."""
    acagpu = acagpu or [sys.executable, "-m", "aca_gpu"]
    speed = speed or Speed()
    sc = draw(seed)
    for step in sc.steps:
        if speed.max_step_s is not None:
            step.timeout = min(step.timeout, speed.max_step_s)
        if step.sigint_at is not None:
            step.sigint_at = speed.moment(step.sigint_at)
    res = ScenarioResult(seed=seed, kind=sc.kind, faults=sc.faults, fired=[], steps=[])
    workdir = Path(tempfile.mkdtemp(prefix=f"acagpu-chaos-{seed}-"))
    started = time.monotonic()
    world: World | None = None
    neighbour: subprocess.Popen[bytes] | None = None
    try:
        world = World(acagpu, workdir, sc.rules, seed, speed, sc.serve_faults)
        keep: set[str] = set()
        if sc.setup == "at-once env":
            setup_at_once_env(world)
            keep = {f"rg-acagpu-env-{AT_ONCE_ENV}"}
        if sc.setup == "warm env":
            neighbour = setup_warm_env(world)
            keep = {f"rg-acagpu-env-{WARM_ENV}", "rg-acagpu-live1"}
        if sc.setup == "kept run":
            setup_kept_run(world, sc.run_id)
        elif sc.setup == "expired runs":
            setup_expired_runs(world, random.Random(seed + 1))
            keep = {"rg-acagpu-live0"}
        for step in sc.steps:
            res.steps.append(run_step(world, step, keep, verbose))
        if neighbour is not None:
            res.error = check_warm_env(world, neighbour)
        if sc.setup == "expired runs":
            inv = world.inventory()
            if not any(g["name"] == "rg-acagpu-live0" and not g["deleting"] for g in inv["resource_groups"]):
                res.error = "reap deleted a run that had not expired"
        res.fired = world.fired()
    except Exception as exc:
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        if neighbour is not None and neighbour.poll() is None:
            neighbour.kill()
            neighbour.wait()
        if world is not None:
            with contextlib.suppress(Exception):
                res.fired = res.fired or world.fired()
            world.close()
        if not keep_dirs:
            shutil.rmtree(workdir, ignore_errors=True)
    res.seconds = round(time.monotonic() - started, 1)
    classify(res)
    return res


# ---- the summary ------------------------------------------------------------------------------


def _normalize(line: str) -> str:
    """One failure's last line with run ids, names, numbers and timings blurred, to group alike ones."""
    line = re.sub(r"c\d{4}[a-k]", "<run>", line)
    line = re.sub(r"gpu-tester-<run>-\w+", "gpu-tester-<run>-<exec>", line)
    line = re.sub(r"\d+(\.\d+)?s\b", "<t>s", line)
    return re.sub(r"\s{2,}", " ", line)


def load_results(path: Path) -> tuple[list[ScenarioResult], float]:
    doc = json.loads(path.read_text())
    results = []
    for raw in doc["scenarios"]:
        steps = [StepResult(**s) for s in raw.pop("steps")]
        for s in steps:  # the rule for a caught crash may be newer than the file
            if s.exit_code != 0 and CAUGHT_CRASH.match(s.last_line):
                s.clear = False
        res = ScenarioResult(**raw, steps=steps)
        classify(res)
        results.append(res)
    return results, float(doc["wall_seconds"])


def _ok(results: list[ScenarioResult], kind: str) -> int:
    return sum(r.verdict == "ok" for r in results if r.kind == kind)


def summarize(results: list[ScenarioResult], wall: float) -> str:
    verdicts = Counter(r.verdict for r in results)
    flags = Counter(f for r in results for f in r.flags)
    lines = [
        f"{len(results)} scenarios in {wall:.0f}s wall",
        "verdicts: "
        + ", ".join(f"{k} {verdicts.get(k, 0)}" for k in ("ok", "clear error", "unclear", "traceback")),
        "flags:    "
        + ", ".join(
            f"{k} {flags.get(k, 0)}"
            for k in (
                "traceback",
                "exit5_on_healthy",
                "leftovers",
                "unclear",
                "hung",
                "noise",
                "bad_json",
                "runner_error",
            )
        ),
        "by flow:  "
        + ", ".join(
            f"{k} {_ok(results, k)}/{sum(r.kind == k for r in results)} ok"
            for k in (*KINDS, "run", "warm", "at-once", "fanout")
        ),
    ]
    runs = [s for r in results if r.kind == "run" for s in r.steps if s.exit_code == s.container_exit]
    if runs:
        said = sum(s.lines_lost_said for s in runs)
        other = sum(bool(s.lines_problem) for s in runs)
        lines.append(
            f"run: ended with the container's code: {len(runs)}; lost lines that acagpu said it could "
            f"not read (excused): {said}; lost or doubled otherwise: {other}"
        )
    at_once = [r for r in results if r.kind == "at-once"]
    if at_once:
        judged = [s for r in at_once for s in r.steps if s.exit_code == s.container_exit]
        lost = [s for s in judged if s.lines_problem]
        sources: Counter[str] = Counter()
        for r in at_once:
            for s in r.steps:
                sources.update(s.lines_from)
        lines.append(
            f"at-once runs: {len(at_once)}; ended with the container's code: {len(judged)}; "
            f"lost or doubled a line: {len(lost)}; lines by source (-o json runs): "
            + (", ".join(f"{k} {v}" for k, v in sorted(sources.items())) or "none")
        )
    for kind in ("warm", "at-once", "run"):
        spent = [
            (s.gpu_seconds, s.billed_gpu_seconds, r.seed)
            for r in results
            if r.kind == kind
            for s in r.steps
            if s.gpu_seconds is not None and s.billed_gpu_seconds
        ]
        if spent:
            off = sorted((abs(m - b) / b * 100, seed, m, b) for m, b, seed in spent)
            gap = max(abs(m - b) for m, b, _ in spent)
            far, seed, measured, billed = off[-1]
            lines.append(
                f"{kind} cost (-o json runs without Ctrl-C): {len(spent)} compared with the emulator's "
                f"billing; within 5 %: {sum(o[0] <= 5 for o in off)}; median "
                f"{statistics.median(o[0] for o in off):.1f} %, worst {far:.1f} % (seed {seed}: "
                f"{measured:.2f} reported, {billed:.2f} billed; {gap:.2f} GPU-s at most)"
            )
    codes = Counter(s.exit_code for r in results for s in r.steps)
    lines.append(
        "exit codes (all commands): " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items(), key=str))
    )
    problems = Counter(s.json_problem for r in results for s in r.steps if s.json_ok is not None)
    lines.append("-o json documents: " + ", ".join(f"{k or 'ok'}: {v}" for k, v in problems.most_common()))
    fired = Counter(f.split()[0] for r in results for f in r.fired)
    lines.append("faults fired: " + ", ".join(f"{k} {v}" for k, v in sorted(fired.items())))
    lines.append(f"scenarios in which an injected fault fired: {sum(bool(r.fired) for r in results)}")
    causes = Counter(
        f"{s.name}: {_normalize(s.last_line)}"
        for r in results
        for s in r.steps
        if not s.clear or s.traceback or s.exit5_on_healthy
    )
    lines.append("most common unclear / traceback / exit-5-on-healthy endings:")
    lines += [f"  {n:3d}  {text[:150]}" for text, n in causes.most_common(12)]
    weight = {
        "traceback": 5,
        "leftovers": 4,
        "exit5_on_healthy": 3,
        "hung": 3,
        "unclear": 2,
        "runner_error": 2,
    }
    worst = sorted(results, key=lambda r: -sum(weight.get(f, 1) for f in r.flags))[:12]
    lines.append("worst (re-run one with --seed N -v):")
    for r in worst:
        if not r.flags:
            break
        bad = next(
            (s for s in r.steps if not s.clear or s.traceback or s.exit5_on_healthy or s.leftovers), None
        )
        detail = f"{bad.name} -> {bad.exit_code}: {bad.last_line[:110]}" if bad else (r.error or "")
        lines.append(f"  seed {r.seed:4d} {r.kind:8s} [{', '.join(r.flags)}] faults: {'; '.join(r.faults)}")
        lines.append(f"            {detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, action="append", help="run only this seed (repeatable)")
    parser.add_argument(
        "--warm",
        type=int,
        default=20,
        help=f"also this many warm-environment scenarios (seeds {WARM_SEEDS}+)",
    )
    parser.add_argument(
        "--at-once",
        type=int,
        default=0,
        help=f"also this many at-once `run` scenarios (seeds {AT_ONCE_SEEDS}+)",
    )
    parser.add_argument(
        "--fanout",
        type=int,
        default=0,
        help=f"also this many `run --shards` scenarios (seeds {FANOUT_SEEDS}+)",
    )
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument(
        "--budget", type=float, default=3600.0, help="wall seconds; later scenarios are skipped"
    )
    parser.add_argument("--json-out", type=Path, default=ROOT / "benchmarks" / "chaos-results.json")
    parser.add_argument("--time-scale", type=float, help="emulator time scale (default: the emulator's own)")
    parser.add_argument("--poll", type=float, help="ACAGPU_POLLING_INTERVAL (default: acagpu's own)")
    parser.add_argument("--keep-dirs", action="store_true", help="keep each scenario's scratch directory")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument(
        "--acagpu", help="how to run acagpu, e.g. 'OTHER/.venv/bin/python -m aca_gpu' (default: this Python)"
    )
    parser.add_argument("--summarize", type=Path, help="print the summary of a results file and stop")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        print(summarize(*load_results(args.summarize)))
        return 0
    acagpu = args.acagpu.split() if args.acagpu else [sys.executable, "-m", "aca_gpu"]
    seeds = args.seed or [
        *range(args.first_seed, args.first_seed + args.scenarios),
        *range(WARM_SEEDS, WARM_SEEDS + args.warm),
        *range(AT_ONCE_SEEDS, AT_ONCE_SEEDS + args.at_once),
        *range(FANOUT_SEEDS, FANOUT_SEEDS + args.fanout),
    ]
    started = time.monotonic()
    results: list[ScenarioResult] = []
    skipped: list[int] = []

    def one(seed: int) -> ScenarioResult | None:
        if STOP.is_set() or time.monotonic() - started > args.budget:
            skipped.append(seed)
            return None
        return run_scenario(seed, acagpu, args.keep_dirs, args.verbose, Speed(args.time_scale, args.poll))

    progress: Callable[[ScenarioResult], None] = lambda r: print(  # noqa: E731
        f"[{len(results):3d}/{len(seeds)}] seed {r.seed:4d} {r.kind:8s} {r.verdict:11s} {r.seconds:5.0f}s"
        f" {','.join(r.flags)}",
        file=sys.stderr,
        flush=True,
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: STOP.set())
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = [pool.submit(one, s) for s in seeds]
        for fut in as_completed(futures):
            r = fut.result()
            if r is not None:
                results.append(r)
                progress(r)
    wall = time.monotonic() - started
    results.sort(key=lambda r: r.seed)
    text = summarize(results, wall)
    if skipped:
        text += f"\nskipped (over --budget): {len(skipped)} seeds"
    print(text)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "wall_seconds": round(wall, 1),
        "scenarios": [asdict(r) for r in results],
        "skipped": sorted(skipped),
    }
    args.json_out.write_text(json.dumps(doc, indent=1))
    return 0 if all(r.verdict in ("ok", "clear error") and not r.flags for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
