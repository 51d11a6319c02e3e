"""Queue mode against a fan-out: N items of S seconds at P, the same work both ways (issue 39).

    python benchmarks/queue_mode.py                          # N=1000 of 30 s, P=50, aca-2026
    python benchmarks/queue_mode.py -n 200 -p 20 --skip-shards
    python benchmarks/queue_mode.py -n 300 -p 20 --skip-shards --with-faults --bad 3   # faults

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
  interval after the job exists, plus that start, or the workers' role propagation on the queues,
  120 emulated s from the grant, whichever ends later);
- GPU-seconds billed (the emulator's `/_emulator/billing` for the run: each replica from its
  container's start to its end) and their ratio to the pure work N x S;
- start overhead per item: (GPU-seconds - N x S) / N;
- correctness: every item's success recorded exactly once, none lost; with `--bad B`, B items
  whose command always fails, each poisoned after K (`--max-deliveries`) deliveries.

`--with-faults` runs queue mode under faults (FAULTS below, or `--faults SPEC`): a worker killed
mid-item (`lost`), ARM 429s to acagpu, the queue service answering 503 ServerBusy and dropping
connections before and after it acted (`queue_busy`, `queue_reset`), and the three platform
behaviours of Event jobs (`event_cap` #1216, `empty_poll` #1125, `idle_replica` #1656); the
figures then add which faults fired and how often.

`--warm-probe` measures a warm floor instead (`--warm 2 --warm-idle W`, at time scale 1): items
put on the queue one by one while the floor waits, each one's pickup (its send to its command's
start), and how long after the last item the floor is gone with no reader (its idle worker sets
minExecutions 0).
"""

from __future__ import annotations

import argparse
import json
import math
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

FAULTS = (
    "lost:count=2,after=45;429:rate=0.02;queue_busy:rate=0.02;queue_reset:rate=0.005,when=before;"
    "queue_reset:rate=0.005,when=after;event_cap:limit=10;empty_poll;idle_replica:count=1;seed=39"
)


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
    faults = f"{quota};{args.faults or FAULTS}" if args.with_faults else quota
    serve = ["emulator", "serve", "--time-scale", str(args.time_scale), "--durations", "aca-2026",
             "--storage", "azurite", "--faults", faults]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server_env = os.environ | {"ACAGPU_EMULATOR_CONTAINERS": "off"}
        with background_server(serve, Path(tmp) / "emu.env", env=server_env) as (emu, _server):
            shell = _shell(emu, tmp)
            _env_create(shell)
            items = Path(tmp) / "items.txt"
            bad = set(_bad_indexes(args.n, args.bad))
            items.write_text("".join(f"bad-{k}\n" if k in bad else f"item-{k}\n" for k in range(args.n)))
            sleep = round(args.seconds * args.time_scale, 3)
            began = time.monotonic()
            ran = subprocess.run(
                [*ACAGPU, "run", "--env", "bench", "--yes", "-o", "json", "--map", str(items),
                 "--workers", str(args.p), "--max-minutes", str(args.max_minutes),
                 "--max-deliveries", str(args.k),
                 "busybox", "--", "sh", "-c", f'sleep {sleep}; case "$ACAGPU_ITEM" in bad-*) exit 3;; esac'],
                env=shell, capture_output=True, text=True, timeout=14400,
            )  # fmt: skip
            wall = time.monotonic() - began
            if not ran.stdout.strip():
                raise SystemExit(ran.stderr[-3000:])
            doc = json.loads(ran.stdout)
            rows = [r for r in emulator_get(emu, "billing")["replicas"] if r["run_id"] == doc["run_id"]]
            fired = {}
            for fault in emulator_get(emu, "faults")["faults"]:
                fired[fault["kind"]] = fired.get(fault["kind"], 0) + fault["fired"]
    scale = args.time_scale
    # the emulator bills each replica in wall seconds from its container's start; a real process
    # (a worker) lived those seconds for real, so they are put on the emulated clock here (/ scale);
    # a simulated one's emulated figure is beside it
    real = [r for r in rows if r["lived"] == "real process"]
    gpu_s = sum(r["gpu_seconds"] / scale if r in real else r["emulated_gpu_seconds"] for r in rows)
    statuses = [i["status"] for i in doc["items"]]
    drain = float(doc["summary"]["drain_s"] or 0.0) / scale
    good = [i for i in doc["items"] if i["index"] not in bad]
    poisoned = [i for i in doc["items"] if i["index"] in bad]
    return {
        "mode": "queue",
        "items": args.n,
        "items_succeeded": statuses.count("succeeded"),
        # one final result per item in the document; a success reported twice is recorded once
        "good_items_succeeded_once": sum(1 for i in good if i["status"] == "succeeded"),
        "good_items_not_succeeded": [i["index"] for i in good if i["status"] != "succeeded"][:20],
        "bad_items_poisoned_after_k": sum(
            1 for i in poisoned if i["status"] == "poisoned" and i["deliveries"] >= args.k
        ),
        "bad_items": len(bad),
        "bad_deliveries": sorted({i["deliveries"] for i in poisoned}),
        "duplicate_successes": doc["summary"]["duplicate_successes"],
        "polling_interval_s": doc["queue"]["polling_interval_s"],
        "lost": args.n - len([s for s in statuses if s != "not_done"]),
        "faults_fired": {k: v for k, v in fired.items() if k != "quota"},
        "workers_started": doc["summary"]["workers_started"],
        "replicas_billed": len(rows),
        "replicas_billed_in_real_seconds": len(real),
        "drain_s": round(drain, 1),
        # ARM's start of the first worker (KEDA's first poll) to the last worker's end, on the emulated clock
        "workers_span_s": round(
            (
                max(_t(w["end_time"]) for w in doc["workers"] if w["end_time"])
                - min(_t(w["start_time"]) for w in doc["workers"] if w["start_time"])
            )
            / scale,
            1,
        )
        if doc["workers"]
        else None,
        "gpu_seconds": round(gpu_s, 1),
        "gpu_seconds_over_work": round(gpu_s / (args.n * args.seconds), 3),
        "start_overhead_per_item_s": round((gpu_s - args.n * args.seconds) / args.n, 2),
        "client_wall_s": round(wall, 1),
        "exit_code": doc["exit_code"],
        "teardown": doc["teardown"]["status"],
        "errors": doc.get("errors", [])[:5],
    }


def _bad_indexes(n: int, bad: int) -> list[int]:
    """`bad` indexes spread over 0..n-1 (none when 0)."""
    return sorted({(k * n) // bad + n // (2 * bad) for k in range(bad)}) if bad else []


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
    gpu_s = float(billed.get("emulated_gpu_seconds") or 0.0)  # played shards: on the scaled clock
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


def _queue_client(emu: dict[str, str], queue: str, account: str) -> Any:
    """The Storage SDK's client of one of the run's queues, with the account's key (listKeys)."""
    import requests
    from azure.storage.queue import QueueClient

    url = (f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/"
           f"rg-acagpu-env-bench/providers/Microsoft.Storage/storageAccounts/{account}")  # fmt: skip
    auth = {"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"}
    verify = emu["ACAGPU_CA_BUNDLE"]
    keys = requests.post(f"{url}/listKeys", params={"api-version": "2023-05-01"}, headers=auth, verify=verify,
                         timeout=30).json()  # fmt: skip
    props = requests.get(
        url, params={"api-version": "2023-05-01"}, headers=auth, verify=verify, timeout=30
    ).json()
    return QueueClient(props["properties"]["primaryEndpoints"]["queue"].rstrip("/"), queue,
                       credential={"account_name": account, "account_key": keys["keys"][0]["value"]},
                       connection_verify=verify)  # fmt: skip


def _job_state(emu: dict[str, str], run: str) -> tuple[int, int]:
    """(the Event job's minExecutions, its executions running now), read through ARM."""
    import requests

    base = (f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/"
            f"rg-acagpu-{run}/providers/Microsoft.App/jobs/run-{run}")  # fmt: skip
    auth, verify = {"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"}, emu["ACAGPU_CA_BUNDLE"]
    api = {"api-version": "2026-07-01"}
    job = requests.get(base, params=api, headers=auth, verify=verify, timeout=30).json()
    runs = requests.get(f"{base}/executions", params=api, headers=auth, verify=verify, timeout=30).json()
    scale = job["properties"]["configuration"]["eventTriggerConfig"]["scale"]
    running = [e for e in runs.get("value") or [] if (e.get("properties") or {}).get("status") == "Running"]
    return int(scale.get("minExecutions") or 0), len(running)


def warm_probe(args: argparse.Namespace) -> dict[str, Any]:
    """`--warm 2`: items put on the queue one by one while the floor waits, each one's pickup (its
    send to its command's start, both on this machine's clock), then how long after the last item
    the floor is gone (minExecutions 0 and no worker running) with no reader. At time scale 1 (the
    worker's receive loop is real seconds), `recorded` durations (the environment is made sooner)."""
    import random
    import statistics

    from aca_gpu.workflow.queue.spec import decode, encode
    from tests.e2e.serving import ACAGPU, background_server

    serve = ["emulator", "serve", "--time-scale", "1", "--durations", "recorded", "--storage", "azurite"]
    rng = random.Random(39)
    with tempfile.TemporaryDirectory() as tmp:
        server_env = os.environ | {"ACAGPU_EMULATOR_CONTAINERS": "off"}
        with background_server(serve, Path(tmp) / "emu.env", env=server_env) as (emu, _server):
            shell = _shell(emu, tmp)
            _env_create(shell)
            items = Path(tmp) / "items.txt"
            items.write_text("warm-0\n")
            made = subprocess.run(
                [*ACAGPU, "run", "--env", "bench", "--yes", "-o", "json", "--map", str(items),
                 "--workers", "2", "--warm", "2", "--warm-idle", str(args.warm_idle), "--detach",
                 "--max-minutes", "600", "busybox", "--", "true"],
                env=shell, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            doc = json.loads(made.stdout)
            run, account = doc["run_id"], doc["storage_account"]
            work = _queue_client(emu, f"acagpu-{run}", account)
            results = _queue_client(emu, f"acagpu-{run}-results", account)
            began = time.monotonic()
            while _job_state(emu, run)[1] < 2 or not results.get_queue_properties().approximate_message_count:
                assert time.monotonic() - began < 900, "the floor never came up"
                time.sleep(0.5)
            for message in results.receive_messages(max_messages=32):
                results.delete_message(message)
            time.sleep(3)  # the floor now waits for items
            pickups: list[float] = []
            last = 0.0
            for k in range(1, args.probes + 1):
                sent = time.time()
                work.send_message(encode(k, f"probe-{k}"))
                found = None
                while found is None:
                    for message in results.receive_messages(max_messages=32, visibility_timeout=5):
                        body = decode(message.content)
                        results.delete_message(message)
                        if body["i"] == k:
                            found = body
                    time.sleep(0.05)
                started = float(found["t"]) - float(found.get("seconds") or 0.0)
                pickups.append(round(started - sent, 3))
                last = float(found["t"])
                time.sleep(rng.uniform(0.3, 2.0))  # each probe meets the receive loop at another phase
            while _job_state(emu, run) != (0, 0):
                assert time.time() - last < args.warm_idle + 600, "the floor never went"
                time.sleep(0.5)
            gone = time.time() - last
            subprocess.run([*ACAGPU, "down", "--run-id", run, "--yes"], env=shell, capture_output=True,
                           timeout=600)  # fmt: skip
    ordered = sorted(pickups)
    return {
        "mode": "warm floor",
        "warm": 2,
        "warm_idle_s": args.warm_idle,
        "probes": len(pickups),
        "pickup_s": {
            "p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)], 2),
            "max": round(ordered[-1], 2),
        },
        "floor_gone_after_last_item_s": round(gone, 1),
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
    parser.add_argument("--with-faults", action="store_true", help="queue mode under FAULTS (module doc)")
    parser.add_argument("--faults", default=None, help="with --with-faults: this spec instead of FAULTS")
    parser.add_argument("--bad", type=int, default=0, help="items whose command always fails")
    parser.add_argument("-k", "--max-deliveries", dest="k", type=int, default=3)
    parser.add_argument("--max-minutes", type=int, default=600,
                        help="a worker's replica timeout (emulated): what ends an idle_replica")  # fmt: skip
    parser.add_argument(
        "--warm-probe", action="store_true", help="only the warm floor's pickups (module doc)"
    )
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--warm-idle", type=int, default=60)
    parser.add_argument("--cold-start", type=float, default=None,
                        help="without the fan-out side: the start (s) to add to the ideal")  # fmt: skip
    args = parser.parse_args()
    found: dict[str, Any] = {"command": " ".join(["python benchmarks/queue_mode.py", *sys.argv[1:]])}
    if args.warm_probe:
        found["warm"] = warm_probe(args)
        print(json.dumps(found, indent=2))
        return 0
    if not args.skip_queue:
        found["queue"] = queue_side(args)
        print(json.dumps(found["queue"]), file=sys.stderr, flush=True)
    if not args.skip_shards:
        found["shards"] = shards_side(args)
    if "queue" in found and ("shards" in found or args.cold_start is not None):
        queue = found["queue"]
        # one cold start of an Event job: its first poll (one interval after the job exists), then
        # the platform's start, as the fan-out measured it on the same emulated platform
        start = found["shards"]["start_median_s"] if "shards" in found else args.cold_start
        # the first item waits for the first poll and a start, and for the workers' new role on the
        # queues to take effect (the emulator's propagation delay, from the grant on), the later of
        # the two
        from aca_gpu.emulator.providers.authorization.models import PROPAGATION_S

        cold = max(queue["polling_interval_s"] + start, PROPAGATION_S)
        queue["cold_start_s"] = {"poll_and_start": round(queue["polling_interval_s"] + start, 1),
                                 "role_propagation": PROPAGATION_S, "counted": round(cold, 1)}  # fmt: skip
        queue["ideal_s"] = round(args.n * args.seconds / args.p + cold, 1)
        queue["drain_over_ideal"] = round(queue["drain_s"] / queue["ideal_s"], 3)
    if "queue" in found and "shards" in found:
        found["gpu_seconds_queue_over_shards"] = round(
            found["queue"]["gpu_seconds"] / max(1e-9, found["shards"]["gpu_seconds"]), 3
        )
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
