"""`acagpu reap` at scale: 1,000 expired groups over 5 emulated subscriptions, ARM throttling deletes.

The emulator (`acagpu emulator serve --subscriptions 5`, its own process) throttles deletes with
ARM's per-subscription token bucket at ARM's published rate (10 deletes per emulated second, bucket
200), starting drained (`start=0`: other callers spent it), so every delete waits its turn. The
reaper finds the groups with one Resource Graph query and deletes them through the ordinary path
(`aca_gpu.workflow.fleet.reap.run`, what `acagpu reap --all-subscriptions --yes` runs).

Floor: the throttle admits a subscription's N-th delete N/10 emulated seconds after the first, and
the last group then takes the emulator's group delete (15 emulated seconds) to disappear; the
subscriptions are throttled independently, so floor = N_per_sub / 10 + 15 emulated seconds. Target:
wall <= 1.2 x floor, every expired group deleted, zero failures, the keep / untagged / fresh groups
untouched, and the reaper's peak memory flat (a 1,000-group run against a 100-group run first).

Usage: python benchmarks/reap_scale.py [--groups 1000] [--subscriptions 5] [--time-scale 1.0]
                                      [--concurrency 4] [--poll 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from aca_gpu.config import load_settings
from aca_gpu.emulator.timing import DURATIONS
from aca_gpu.naming import run_tags
from aca_gpu.workflow.fleet import reap as reap_flow
from aca_gpu.workflow.fleet.groups import Scope

REFILL = 10.0  # ARM: deletes per second per subscription (bucket 200)
API = "2025-04-01"


class Printer:
    """Progress on stderr, one line per update (what a terminal shows on one line)."""

    def __init__(self) -> None:
        self.lines = 0

    def step(self, name: str) -> Any:
        printer = self

        class Step:
            def __enter__(self) -> Step:
                print(f"  {name}", file=sys.stderr, flush=True)
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def update(self, detail: str) -> None:
                printer.lines += 1
                print(f"    {detail}", file=sys.stderr, flush=True)

        return Step()

    def note(self, message: str) -> None:
        print(f"  {message}", file=sys.stderr)

    def warn(self, message: str) -> None:
        print(f"  warning: {message}", file=sys.stderr)


def serve(workdir: Path, subscriptions: int, scale: float) -> tuple[subprocess.Popen[str], dict[str, str]]:
    env_file = workdir / "emu.env"
    proc = subprocess.Popen(
        [sys.executable, "-m", "aca_gpu", "emulator", "serve", "--registered", "--time-scale", str(scale),
         "--subscriptions", str(subscriptions), "--env-file", str(env_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    end = time.monotonic() + 60
    while not env_file.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.1)
    if not env_file.exists():
        raise SystemExit(f"emulator did not start: {proc.stderr.read() if proc.stderr else ''}")
    env = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value.strip("'")
    return proc, env


class Emulator:
    def __init__(self, env: dict[str, str]) -> None:
        self.root = env["ACAGPU_ARM_ENDPOINT"]
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {env['ACAGPU_TOKEN']}"
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the emulator's CA
        self.session.verify = env["ACAGPU_CA_BUNDLE"]

    def control(self, method: str, name: str, **kw: Any) -> Any:
        return self.session.request(method, f"{self.root}/_emulator/{name}", timeout=60, **kw).json()

    def subscriptions(self) -> list[str]:
        got = self.session.get(f"{self.root}/subscriptions", params={"api-version": API}, timeout=60)
        return [s["subscriptionId"] for s in got.json()["value"]]

    def put_group(self, sub: str, name: str, tags: dict[str, str]) -> None:
        url = f"{self.root}/subscriptions/{sub}/resourcegroups/{name}"
        got = self.session.put(
            url, params={"api-version": API}, json={"location": "eastus", "tags": tags}, timeout=60
        )
        got.raise_for_status()

    def groups(self, sub: str) -> dict[str, dict[str, str]]:
        doc = self.control("GET", "inventory", params={"subscription": sub})
        return {g["name"]: g["tags"] for g in doc["resource_groups"]}

    def throttled(self, sub: str) -> int:
        return int(self.control("GET", "inventory", params={"subscription": sub})["throttled"])


def seed(emu: Emulator, subs: list[str], per_sub: int) -> dict[str, set[str]]:
    """per_sub expired runs per subscription, plus per_sub // 10 each of kept, untagged and fresh groups."""
    old = datetime.now(UTC) - timedelta(hours=5)
    extra = max(1, per_sub // 10)
    jobs: list[tuple[str, str, dict[str, str]]] = []
    expect: dict[str, set[str]] = {"doomed": set(), "stay": set()}
    for s, sub in enumerate(subs):
        for i in range(per_sub):
            run = f"x{s}n{i}"
            jobs.append(
                (
                    sub,
                    f"rg-acagpu-{run}",
                    run_tags(run, owner="bench", ttl=timedelta(hours=1), now=old, gpu="t4"),
                )
            )
            expect["doomed"].add(f"{sub}/rg-acagpu-{run}")
        for i in range(extra):
            kept = run_tags(f"k{s}n{i}", owner="bench", ttl=timedelta(hours=1), now=old, keep=True)
            fresh = run_tags(f"f{s}n{i}", owner="bench", ttl=timedelta(hours=9))
            stranger = {"team": "ml", "acagpu:expires-at": "2000-01-01T00:00:00Z"}
            named = (
                (f"rg-acagpu-k{s}n{i}", kept),
                (f"rg-acagpu-f{s}n{i}", fresh),
                (f"rg-team-{s}-{i}", stranger),
            )
            for name, tags in named:
                jobs.append((sub, name, tags))
                expect["stay"].add(f"{sub}/{name}")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda j: emu.put_group(*j), jobs))
    return expect


def one_run(emu: Emulator, subs: list[str], per_sub: int, args: argparse.Namespace) -> dict[str, Any]:
    emu.control("POST", "reset")
    expect = seed(emu, subs, per_sub)
    emu.control("POST", "faults", data=f"throttle:op=deletes,refill={REFILL:g},burst=200,start=0")
    settings = load_settings().with_overrides(polling_interval=args.poll)
    printer = Printer()
    start = time.monotonic()
    report = reap_flow.run(
        settings, Scope(everything=True), delete=True, concurrency=args.concurrency, progress=printer
    )
    wall = time.monotonic() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    left = {f"{sub}/{name}" for sub in subs for name in emu.groups(sub)}
    counts = report.as_dict()["counts"]
    floor_emulated = per_sub / REFILL + DURATIONS["rg_delete_extra"]
    return {
        "groups": per_sub * len(subs),
        "subscriptions": len(subs),
        "deleted": counts["deleted"],
        "failed": counts["failed"],
        "skipped": counts["skipped"],
        "all_doomed_gone": not (expect["doomed"] & left),
        "others_untouched": expect["stay"] <= left and left == expect["stay"],
        "throttled_429": sum(emu.throttled(sub) for sub in subs),
        "wall_s": round(wall, 2),
        "wall_emulated_s": round(wall / args.time_scale, 2),
        "floor_emulated_s": floor_emulated,
        "ratio": round(wall / args.time_scale / floor_emulated, 3),
        "progress_lines": printer.lines,
        "peak_rss_mib": round(rss_mib, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--subscriptions", type=int, default=5)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--poll", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acagpu-reap-bench-") as tmp:
        proc, env = serve(Path(tmp), args.subscriptions, args.time_scale)
        try:
            os.environ.update(env)
            emu = Emulator(env)
            subs = emu.subscriptions()
            per_sub = args.groups // len(subs)
            small = one_run(emu, subs, max(1, per_sub // 10), args)
            print(json.dumps({"run": "small", **small}), flush=True)
            large = one_run(emu, subs, per_sub, args)
            print(json.dumps({"run": "large", **large}), flush=True)
            growth = large["peak_rss_mib"] - small["peak_rss_mib"]
            ok = (
                large["failed"] == 0
                and large["deleted"] == large["groups"]
                and large["all_doomed_gone"]
                and large["others_untouched"]
                and large["ratio"] <= 1.2
            )
            lg, sm = large, small
            print(
                f"reap {lg['groups']} groups over {lg['subscriptions']} subscriptions: "
                f"{lg['deleted']} deleted, {lg['failed']} failed, {lg['throttled_429']} answers 429; "
                f"wall {lg['wall_emulated_s']:.1f} emulated s vs floor {lg['floor_emulated_s']:.1f} "
                f"(ratio {lg['ratio']:.3f}, target <= 1.2); peak RSS {sm['peak_rss_mib']:.0f} MiB after "
                f"{sm['groups']} groups, {lg['peak_rss_mib']:.0f} MiB after {lg['groups']} "
                f"(+{growth:.1f} MiB); {'PASS' if ok else 'FAIL'}"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
