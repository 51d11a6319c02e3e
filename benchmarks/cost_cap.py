"""A 200-shard fan-out under `--max-cost` at 30 % of its ceiling, then `--rerun-failed`, against the emulator.

    python benchmarks/cost_cap.py                          # N=200, P=50, 30 % of the ceiling
    python benchmarks/cost_cap.py -n 200 -p 50 --pct 30 --seconds 100 --max-minutes 3

The server runs in its own process (`emulator serve --time-scale S`, GPU quota raised to P+10); the
fan-out runs in a warm environment. The client is a child process running what `acagpu run --shards
N --max-cost USD` runs (`run_fanout` with the run's record saved), each shard a played job of
`--seconds` emulated seconds (`ACAGPU_EMULATOR_SECONDS`, which the CLI's `-e` reserves), so the cap
is reached mid-run. A second child runs `--rerun-failed RUN_ID` with a cap as large as the ceiling.

Clocks, labelled: the ceiling the plan states is Azure time (N x --max-minutes at one replica's
price). Under time scale S a played replica lives S x its emulated seconds of wall time, and the
emulator bills wall seconds (its `/_emulator/billing`, the clock Cost Management prices), as acagpu's
own spend figure is. So the cap is `--pct` of the ceiling on that clock: pct x ceiling x S.

Figures and checks:
- the cap, what the emulator billed for the capped run (sum of its replicas' wall seconds x the
  price), and the stated bound: cap + the document's `overshoot_bound_usd` (replicas running x
  their price x one look) + what the replicas running at the cap billed while ARM accepted their
  stops (`stops_took_s`, which the bound states it leaves out). PASS when the bill is within it;
- which shards ran: succeeded, stopped at the cap, never started (the document's summary), and
  that none was running in the emulator afterwards;
- the rerun: exit 0, every shard not succeeded before succeeded now, and every index succeeded
  exactly once over the two runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMAGE = "mcr.microsoft.com/k8se/quickstart-jobs:latest"  # played by the emulator: no Podman, no sh -c


def client(args: argparse.Namespace) -> None:
    """The child: one capped fan-out (or the rerun of one), its document on stdout."""
    from dataclasses import replace

    from aca_gpu.config import load_settings
    from aca_gpu.output import Output
    from aca_gpu.workflow.base.context import Waiter, open_cloud
    from aca_gpu.workflow.fanout import ledger
    from aca_gpu.workflow.fanout.run import run_fanout
    from aca_gpu.workflow.fanout.spec import make_fanout
    from aca_gpu.workflow.workload.plan import RunRequest, capped, make_run_spec, replica_price

    settings = load_settings()
    played = {"ACAGPU_EMULATOR_SECONDS": str(args.seconds)}
    indexes = None
    if args.rerun:
        request, _opts, indexes = ledger.load_failed(args.rerun)
        request = replace(request, run_id=None)  # a run of its own, as `--rerun-failed` makes
    else:
        request = RunRequest(
            image=IMAGE, env_name="bench", max_minutes=args.max_minutes, start_timeout="600s"
        )
    spec = make_run_spec(settings, request, owner="benchmark")
    spec = replace(spec, workload=replace(spec.workload, env={**spec.workload.env, **played}))
    per_s, _ = replica_price(spec.plan.pairs[0].profile, spec.workload.cpu, spec.workload.memory_gib)
    ceiling = args.n * args.max_minutes * 60 * per_s  # Azure time, as the plan states it
    cap = ceiling * args.time_scale * (args.pct / 100 if not args.rerun else 1.0)  # the emulator's clock
    spec = capped(spec, round(cap, 7))
    fanout = make_fanout(spec, shards=args.n, map_file=None, indexes=indexes, parallel=args.p, retries=0,
                         logs="none", rerun_of=args.rerun or None)  # fmt: skip
    output = Output("json", stdout=sys.stderr, stderr=sys.stderr, command="run")
    outcome = run_fanout(open_cloud(settings), fanout, output, Waiter(interval=settings.polling_interval),
                         request=request)  # fmt: skip
    doc = outcome.document()
    doc["benchmark"] = {"usd_per_s": per_s, "ceiling_usd_azure_time": ceiling, "cap_usd": round(cap, 7)}
    print(json.dumps(doc))
    sys.exit(int(doc["exit_code"]))


def _child(shell: dict[str, str], args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    child = subprocess.run(
        [sys.executable, __file__, "--client", "-n", str(args.n), "-p", str(args.p), "--pct", str(args.pct),
         "--seconds", str(args.seconds), "--max-minutes", str(args.max_minutes),
         "--time-scale", str(args.time_scale), *extra],
        env=shell, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if not child.stdout.strip():
        print(child.stderr[-3000:], file=sys.stderr)
        raise SystemExit(1)
    doc: dict[str, Any] = json.loads(child.stdout)
    doc["benchmark"]["exit_code"] = child.returncode
    return doc


def _succeeded(doc: dict[str, Any]) -> set[int]:
    return {s["index"] for s in doc["shards"] if s["status"] == "succeeded"}


def _why(doc: dict[str, Any]) -> dict[str, int]:
    """How the shards that did not succeed ended: status and the last attempt's reason, counted."""
    found: dict[str, int] = {}
    for shard in doc["shards"]:
        if shard["status"] != "succeeded":
            last = (shard.get("attempts") or [{}])[-1]
            key = f"{shard['status']}: {(last.get('reason') or '-').split(':')[0][:60]}"
            found[key] = found.get(key, 0) + 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("-p", type=int, default=50)
    parser.add_argument("--pct", type=float, default=30.0, help="the cap, in % of the ceiling")
    parser.add_argument("--seconds", type=float, default=100.0, help="each shard's emulated run time")
    parser.add_argument("--max-minutes", type=int, default=3, help="each shard's ceiling (Azure minutes)")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rerun", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return 0

    from tests.e2e.serving import ACAGPU, emulator_get, emulator_serve

    extra = ("--faults", f"quota:region=eastus,profile=T4,limit={args.p + 10}")
    with (
        tempfile.TemporaryDirectory() as tmp,
        emulator_serve(Path(tmp) / "emu.env", time_scale=args.time_scale, extra=extra) as emu,
    ):
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.2", "ACAGPU_CACHE_DIR": f"{tmp}/cache"}
        shell.pop("ACAGPU_ENV", None)
        made = subprocess.run([*ACAGPU, "env", "create", "bench", "-l", "eastus", "--gpu", "t4", "--yes"],
                              env=shell, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert made.returncode == 0, made.stderr
        began = time.monotonic()
        first = _child(shell, args)
        capped_wall = time.monotonic() - began
        run_id = first["run_id"]
        bill = [r for r in emulator_get(emu, "billing")["replicas"] if r["run_id"] == run_id]
        running_after = sum(1 for r in bill if r["running"])
        per_s, cap = first["benchmark"]["usd_per_s"], first["benchmark"]["cap_usd"]
        spent = sum(r["wall_seconds"] for r in bill) * per_s
        cost_cap = first["cost_cap"]
        stopping = (
            cost_cap["overshoot_bound_usd"]
            / max(cost_cap["look_every_s"], 1e-9)
            * (cost_cap["stops_took_s"] or 0.0)
        )  # the replicas running at the cap x their price x the time ARM took to accept the stops
        bound = cap + cost_cap["overshoot_bound_usd"] + stopping
        summary = first["summary"]
        ran = _succeeded(first)

        began = time.monotonic()
        second = _child(shell, args, "--rerun", run_id)
        rerun_wall = time.monotonic() - began
        again = _succeeded(second)
    figures = {
        "command": " ".join(["python benchmarks/cost_cap.py", *sys.argv[1:]]),
        "shards": args.n,
        "parallel": args.p,
        "clock": f"wall seconds at time scale {args.time_scale} (a played shard: {args.seconds:g} emulated s "
        f"= {args.seconds * args.time_scale:g} wall s)",
        "ceiling_usd_azure_time": round(first["benchmark"]["ceiling_usd_azure_time"], 4),
        "cap_usd": cap,
        "cap_pct_of_ceiling_on_the_emulators_clock": args.pct,
        "capped_run": {
            "exit_code": first["benchmark"]["exit_code"],
            "error_code": (first.get("error") or {}).get("code"),
            "said": (first.get("error") or {}).get("message", "")[:300],
            "succeeded": len(ran),
            "unfinished": len(summary.get("unfinished_indexes") or []),
            "how_the_rest_ended": _why(first),
            "billed_usd": round(spent, 6),
            "billed_over_cap_usd": round(spent - cap, 6),
            "overshoot_bound_usd": cost_cap["overshoot_bound_usd"],
            "bound_rule": cost_cap["overshoot_bound"],
            "stops_took_s": cost_cap["stops_took_s"],
            "bound_with_stops_usd": round(bound, 6),
            "within_bound": spent <= bound,
            "replicas_running_after": running_after,
            "wall_s": round(capped_wall, 1),
        },
        "rerun": {
            "exit_code": second["benchmark"]["exit_code"],
            "shards": len(second["shards"]),
            "succeeded": len(again),
            "how_the_rest_ended": _why(second),
            "completes_the_rest": again == set(range(args.n)) - ran,
            "wall_s": round(rerun_wall, 1),
        },
        "every_index_once": ran | again == set(range(args.n)) and not ran & again,
    }
    ok = (
        figures["capped_run"]["exit_code"] == 8
        and figures["capped_run"]["within_bound"]
        and running_after == 0
        and figures["rerun"]["exit_code"] == 0
        and figures["rerun"]["completes_the_rest"]
        and figures["every_index_once"]
    )
    figures["check"] = "PASS" if ok else "FAIL"
    print(json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
