"""Queue mode against a fan-out: N items of S seconds at P, the same work both ways (issue 39).

    python benchmarks/queue_mode.py                          # N=1000 of 30 s, P=50, aca-2026
    python benchmarks/queue_mode.py -n 200 -p 20 --skip-shards

**Queue mode** runs for real: `acagpu emulator serve --durations aca-2026 --storage azurite` (the
workers' starts, scheduling and image pull, on the emulated clock; the queues in Azurite), and
`acagpu run --env bench --map ITEMS --workers P` as a user would, each worker the injected script
running `sh -c 'sleep S'` per item in the replica's sandbox. Real processes bill in real seconds
(the emulator's rule), so this side runs at `--time-scale 1` by default: emulated and real
seconds are then the same, and no per-item overhead (the worker's receive, result and delete
calls) is inflated by a time scale. At a smaller `--time-scale` the items sleep S x scale real
seconds and every real second of overhead counts 1/scale emulated seconds: an upper bound.

**The fan-out** (`--shards`) is `benchmarks/fanout.py`'s client: N played shards of S emulated
seconds at P through `run_fanout`, in a second emulator at `--shards-time-scale` (0.05): all its
seconds are emulated, so the scale costs it nothing.

Figures (seconds on Azure's clock: emulated, or real at scale 1):
- makespan: queue mode's drain (its Event job's creation to the last item's final result, the
  document's `summary.drain_s`), the fan-out's first start to its last end; ideal: N x S / P plus
  one cold start (the fan-out's: its median start; queue mode's: the first KEDA poll, one polling
  interval after the job exists, plus that start);
- GPU-seconds billed (the emulator's `/_emulator/billing` for the run: each replica from its
  container's start to its end) and their ratio to the pure work N x S;
- start overhead per item: (GPU-seconds - N x S) / N;
- correctness: every item's success recorded exactly once, none lost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _t(text: str | None) -> float:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def _shell(emu: dict[str, str], tmp: str) -> dict[str, str]:
    shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.5", "ACAGPU_CACHE_DIR": f"{tmp}/cache"}
    shell.pop("ACAGPU_ENV", None)
    return shell


def _env_create(shell: dict[str, str]) -> None:
    from tests.e2e.serving import ACAGPU

    made = subprocess.run([*ACAGPU, "env", "create", "bench", "-l", "eastus", "--gpu", "t4", "--yes"],
                          env=shell, capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert made.returncode == 0, made.stderr


def queue_side(args: argparse.Namespace) -> dict[str, Any]:
    from tests.e2e.serving import ACAGPU, background_server, emulator_get

    quota = f"quota:region=eastus,profile=T4,limit={args.p + 10}"
    serve = ["emulator", "serve", "--time-scale", str(args.time_scale), "--durations", "aca-2026",
             "--storage", "azurite", "--faults", quota]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server_env = os.environ | {"ACAGPU_EMULATOR_CONTAINERS": "off"}
        with background_server(serve, Path(tmp) / "emu.env", env=server_env) as (emu, _server):
            shell = _shell(emu, tmp)
            _env_create(shell)
            items = Path(tmp) / "items.txt"
            items.write_text("".join(f"item-{k}\n" for k in range(args.n)))
            sleep = round(args.seconds * args.time_scale, 3)
            began = time.monotonic()
            ran = subprocess.run(
                [*ACAGPU, "run", "--env", "bench", "--yes", "-o", "json", "--map", str(items),
                 "--workers", str(args.p), "--max-minutes", "600", "busybox", "--", "sh", "-c",
                 f"sleep {sleep}"],
                env=shell, capture_output=True, text=True, timeout=7200,
            )  # fmt: skip
            wall = time.monotonic() - began
            if not ran.stdout.strip():
                raise SystemExit(ran.stderr[-3000:])
            doc = json.loads(ran.stdout)
            rows = [r for r in emulator_get(emu, "billing")["replicas"] if r["run_id"] == doc["run_id"]]
    scale = args.time_scale
    # the emulator bills a replica from its container's start; a real process's seconds are real
    # (`seconds` equal to `wall_seconds`): those are put on the emulated clock here
    real = [r for r in rows if r["seconds"] == r["wall_seconds"] and scale != 1]
    gpu_s = sum(r["gpu_seconds"] / scale if r in real else r["gpu_seconds"] for r in rows)
    statuses = [i["status"] for i in doc["items"]]
    drain = float(doc["summary"]["drain_s"] or 0.0) / scale
    return {
        "mode": "queue",
        "items_succeeded": statuses.count("succeeded"),
        "duplicate_successes": doc["summary"]["duplicate_successes"],
        "polling_interval_s": doc["queue"]["polling_interval_s"],
        "lost": args.n - len([s for s in statuses if s != "not_done"]),
        "workers_started": doc["summary"]["workers_started"],
        "replicas_billed": len(rows),
        "replicas_billed_in_real_seconds": len(real),
        "drain_s": round(drain, 1),
        "gpu_seconds": round(gpu_s, 1),
        "gpu_seconds_over_work": round(gpu_s / (args.n * args.seconds), 3),
        "start_overhead_per_item_s": round((gpu_s - args.n * args.seconds) / args.n, 2),
        "client_wall_s": round(wall, 1),
        "exit_code": doc["exit_code"],
        "teardown": doc["teardown"]["status"],
        "errors": doc.get("errors", [])[:5],
    }


def shards_side(args: argparse.Namespace) -> dict[str, Any]:
    from tests.e2e.serving import emulator_get, emulator_serve

    scale = args.shards_time_scale
    quota = f"quota:region=eastus,profile=T4,limit={args.p + 10}"
    with (
        tempfile.TemporaryDirectory() as tmp,
        emulator_serve(
            Path(tmp) / "emu.env", time_scale=scale, extra=("--durations", "aca-2026", "--faults", quota)
        ) as emu,
    ):
        shell = _shell(emu, tmp) | {"ACAGPU_POLLING_INTERVAL": "0.2"}
        _env_create(shell)
        began = time.monotonic()
        child = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "fanout.py"), "--client", "-n", str(args.n), "-p",
             str(args.p), "--seconds", str(args.seconds), "--time-scale", str(scale)],
            env=shell, capture_output=True, text=True, timeout=7200,
        )  # fmt: skip
        wall = time.monotonic() - began
        if not child.stdout.strip():
            raise SystemExit(child.stderr[-3000:])
        doc = json.loads(child.stdout)
        billed = emulator_get(emu, "billing")["runs"].get(doc["run_id"], {})
    from benchmarks.fanout import judge

    figures = judge(doc, args.n, args.p, scale, args.seconds)
    gpu_s = float(billed.get("gpu_seconds") or 0.0)  # played shards: emulated seconds already
    return {
        "mode": "shards",
        "items_succeeded": figures["exactly_one_success"],
        "makespan_s": figures["makespan_emulated_s"],
        "ideal_s": round(args.n * args.seconds / args.p + figures["start_median_emulated_s"], 1),
        "makespan_over_ideal": round(
            figures["makespan_emulated_s"]
            / (args.n * args.seconds / args.p + figures["start_median_emulated_s"]),
            3,
        ),
        "start_median_s": figures["start_median_emulated_s"],
        "gpu_seconds": round(gpu_s, 1),
        "gpu_seconds_over_work": round(gpu_s / (args.n * args.seconds), 3),
        "start_overhead_per_item_s": round((gpu_s - args.n * args.seconds) / args.n, 2),
        "client_wall_s": round(wall, 1),
        "exit_code": figures["exit_code"],
        "teardown": figures["teardown"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("-p", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0, help="each item's own (emulated) seconds")
    parser.add_argument("--time-scale", type=float, default=0.1, help="queue mode's emulator")
    parser.add_argument("--shards-time-scale", type=float, default=0.05, help="the fan-out's emulator")
    parser.add_argument("--skip-shards", action="store_true")
    parser.add_argument("--skip-queue", action="store_true")
    args = parser.parse_args()
    found: dict[str, Any] = {"command": " ".join(["python benchmarks/queue_mode.py", *sys.argv[1:]])}
    if not args.skip_queue:
        found["queue"] = queue_side(args)
        print(json.dumps(found["queue"]), file=sys.stderr, flush=True)
    if not args.skip_shards:
        found["shards"] = shards_side(args)
    if "queue" in found and "shards" in found:
        queue, shards = found["queue"], found["shards"]
        # one cold start of an Event job: its first poll (one interval after the job exists), then
        # the platform's start, as the fan-out measured it on the same emulated platform
        cold = queue["polling_interval_s"] + shards["start_median_s"]
        queue["ideal_s"] = round(args.n * args.seconds / args.p + cold, 1)
        queue["drain_over_ideal"] = round(queue["drain_s"] / queue["ideal_s"], 3)
        found["gpu_seconds_queue_over_shards"] = round(
            found["queue"]["gpu_seconds"] / max(1e-9, found["shards"]["gpu_seconds"]), 3
        )
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
