"""Fan-out at scale: N shards of 60 emulated seconds at P at once, against `acagpu emulator serve`.

    python benchmarks/fanout.py                                  # N=1000, P=50, aca-2026 durations
    python benchmarks/fanout.py --faults                         # the same with platform faults,
                                                                 # 429s and connection resets
    python benchmarks/fanout.py -n 200 -p 20 --time-scale 0.05   # smaller

The server runs in its own process (`emulator serve --durations aca-2026 --time-scale S`, GPU quota
raised to P+10 with `quota:limit=`); with `--faults` the chaos proxy sits in front of it and resets
some connections. The client is a child process running the same `run_fanout` the CLI runs (each
shard is a played job: `ACAGPU_EMULATOR_SECONDS=60` in its env, which the CLI's `-e` reserves), so
its CPU and peak memory are measured alone (`getrusage` of the child). Figures:

- makespan over ideal: the fan-out's wall time (first start to last end) over ⌈N/P⌉ × (start + 60 s),
  where start is the median measured start (request to running) of the shards' first attempts;
  both in emulated seconds (real / time scale). Goal ≤ 1.15.
- starts per second: mean, and the most in any 10 s window (the write budget allows 200 + 10/s);
  429s the emulator answered, and any start that failed for good (an unhandled 429 would be one).
- correctness: every index has exactly one successful attempt, none is lost, none succeeded
  twice, and no platform retry spent a user retry (`--retries 0` with faults: any user retry is a bug).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMAGE = "mcr.microsoft.com/k8se/quickstart-jobs:latest"  # played by the emulator: no Podman, no sh -c
FAULTS = "stuck:rate=0.02;backoff:rate=0.02;pull_stall:rate=0.01;lost:rate=0.01;429:rate=0.02;seed=7"
RESETS = {  # a listing cut before it reaches ARM, and a start whose answer is lost after ARM acted
    "rules": [
        {"fault": "reset", "path": "/executions", "rate": 0.01, "when": "before"},
        {"fault": "reset", "method": "POST", "path": "/start", "rate": 0.01, "when": "after"},
    ]
}


def client(args: argparse.Namespace) -> None:
    """The child: one fan-out through run_fanout, its document on stdout."""
    from dataclasses import replace

    from aca_gpu.config import load_settings
    from aca_gpu.output import Output
    from aca_gpu.workflow.base.context import Waiter, open_cloud
    from aca_gpu.workflow.fanout.run import run_fanout
    from aca_gpu.workflow.fanout.spec import make_fanout
    from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

    settings = load_settings()
    request = RunRequest(
        image=IMAGE, env_name="bench", max_minutes=30, start_timeout=f"{max(1, round(args.start_timeout))}s"
    )
    spec = make_run_spec(settings, request, owner="benchmark")
    played = {"ACAGPU_EMULATOR_SECONDS": str(args.seconds)}
    spec = replace(spec, workload=replace(spec.workload, env={**spec.workload.env, **played}))
    fanout = make_fanout(spec, shards=args.n, map_file=None, parallel=args.p, retries=0, logs="none")
    output = Output("json", stdout=sys.stderr, stderr=sys.stderr, command="run")
    outcome = run_fanout(open_cloud(settings), fanout, output, Waiter(interval=settings.polling_interval),
                         tick_s=args.tick)  # fmt: skip
    print(json.dumps(outcome.document()))


def judge(doc: dict[str, Any], n: int, p: int, scale: float, seconds: float) -> dict[str, Any]:
    shards = doc["shards"]
    succeeded = [sum(1 for a in s["attempts"] if a["status"] == "succeeded") for s in shards]
    starts = [a["start_s"] for s in shards for a in s["attempts"][:1] if a.get("start_s") is not None]
    start_emulated = statistics.median(starts) / scale if starts else float("nan")
    ideal = math.ceil(n / p) * (start_emulated + seconds)
    wall = (doc["pacing"].get("first_start_to_last_end_s") or 0.0) / scale
    return {
        "shards": len(shards),
        "indexes_ok": sorted(s["index"] for s in shards) == list(range(n)),
        "exactly_one_success": sum(1 for c in succeeded if c == 1),
        "none_twice": all(c <= 1 for c in succeeded),
        "failed": doc["summary"]["failed_indexes"],
        "attempts": doc["summary"]["attempts"],
        "platform_retries": doc["summary"]["platform_retries"],
        "user_retries": doc["summary"]["user_retries"],
        "platform_reasons": sorted(
            {
                (a["reason"] or "").split(":")[0]
                for s in shards
                for a in s["attempts"]
                if a["fault"] == "platform"
            }
        ),
        "start_median_emulated_s": round(start_emulated, 1),
        "makespan_emulated_s": round(wall, 1),
        "ideal_emulated_s": round(ideal, 1),
        "makespan_over_ideal": round(wall / ideal, 3) if ideal else None,
        "parallel_used": doc["parallel"]["used"],
        "pacing": doc["pacing"],
        "errors": doc.get("errors", [])[:5],
        "exit_code": doc["exit_code"],
        "teardown": doc["teardown"]["status"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("-p", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="each shard's emulated run time")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--start-timeout", type=float, default=60.0, help="real seconds")
    parser.add_argument("--tick", type=float, default=0.25, help="real seconds between listings")
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return 0

    from tests.e2e.serving import ACAGPU, emulator_serve

    quota = f"quota:region=eastus,profile=T4,limit={args.p + 10}"
    spec = f"{quota};{FAULTS}" if args.faults else quota
    extra = ("--durations", "aca-2026", "--faults", spec)
    with (
        tempfile.TemporaryDirectory() as tmp,
        emulator_serve(Path(tmp) / "emu.env", time_scale=args.time_scale, extra=extra) as emu,
    ):
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.2", "ACAGPU_CACHE_DIR": f"{tmp}/cache"}
        shell.pop("ACAGPU_ENV", None)
        proxy = None
        if args.faults:
            from tests.chaos.proxy import ChaosProxy

            proxy = ChaosProxy(
                emu["ACAGPU_ARM_ENDPOINT"], emu["ACAGPU_CA_BUNDLE"], workdir=Path(tmp) / "proxy"
            )
            proxy.__enter__()
        try:
            made = subprocess.run([*ACAGPU, "env", "create", "bench", "-l", "eastus", "--gpu", "t4", "--yes"],
                                  env=shell, capture_output=True, text=True, timeout=600)  # fmt: skip
            assert made.returncode == 0, made.stderr
            if proxy is not None:
                proxy.set_rules(RESETS)
                shell |= {"ACAGPU_ARM_ENDPOINT": proxy.endpoint, "ACAGPU_CA_BUNDLE": proxy.ca_bundle}
            began = time.monotonic()
            child = subprocess.run(
                [sys.executable, __file__, "--client", "-n", str(args.n), "-p", str(args.p),
                 "--seconds", str(args.seconds), "--time-scale", str(args.time_scale),
                 "--start-timeout", str(args.start_timeout), "--tick", str(args.tick)],
                env=shell, capture_output=True, text=True, timeout=3600,
            )  # fmt: skip
            wall = time.monotonic() - began
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            if proxy is not None:
                import requests

                events = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=30)
                resets = sum(1 for e in events.json()["events"] if e.get("fault") == "reset")
                proxy.__exit__(None, None, None)
        if child.returncode not in (0, 1, 4, 7) or not child.stdout.strip():
            print(child.stderr[-3000:], file=sys.stderr)
            return 1
        doc = json.loads(child.stdout)
        figures = judge(doc, args.n, args.p, args.time_scale, args.seconds)
        figures["client"] = {
            "wall_s": round(wall, 1),
            # the children so far: env create's process and the fan-out's (the fan-out dominates)
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
        }
        if proxy is not None:
            figures["connection_resets"] = resets
        figures["command"] = " ".join(["python benchmarks/fanout.py", *sys.argv[1:]])
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
