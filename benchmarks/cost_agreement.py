"""Estimate against bill: `up` runs on the emulator, then `acagpu cost`, per time scale.

Usage: python benchmarks/cost_agreement.py [--scales 0.005,0.02,0.05] [--runs 2] [--stall 0]
                                          [--kinds cold,warm,run,warm-run]

For each time scale a fresh emulator (threaded, HTTPS) serves N T4 runs through the real CLI; then
`acagpu cost -o json` sets each run's estimate (what the run measured, priced at the table) beside
the emulator's Cost Management bill (the replicas' wall-clock lives at the same meters). With
`--stall SECONDS` one more run has its tester stall that long (emulated) between pull and create.
Prints one line per run and, per scale, the median absolute difference: the client's observation
lag (polling, the tester's first line, teardown's first calls) is constant in wall seconds, so it
weighs less as replicas live longer.

`--kinds` picks the journeys: `cold` (`up --gpu t4`), `warm` (`up --env lab`, `test --env lab`,
`validate --env lab`, in a warm environment made first), `run` (`acagpu run --gpu t4` of a shell line)
and `warm-run` (`acagpu run --env lab`). Each row also sets the GPU-seconds the run printed beside
the emulator's own billing (`/_emulator/billing`, each replica's wall-clock life): `gpu %`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.server import EmulatorServer


def _invoke(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, list(args))
    if result.exit_code != 0:
        raise SystemExit(f"acagpu {' '.join(args)} exited {result.exit_code}: {result.stderr[-400:]}")
    try:
        doc: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        raise SystemExit(f"acagpu {' '.join(args)}: no JSON document: {result.stdout[-400:]!r}") from None
    return doc


IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def _journeys(kinds: list[str], runs: int, run_seconds: float = 1.0) -> list[tuple[str, list[str]]]:
    """(label, acagpu arguments) of every run to make, in order; `acagpu run`'s container sleeps
    `run_seconds` (a real process in the emulator's sandbox: wall seconds at any time scale)."""
    line = (IMAGE, "--", "sh", "-c", f"sleep {run_seconds:g}; echo done")
    found: list[tuple[str, list[str]]] = []
    for n in range(runs):
        if "cold" in kinds:
            found.append((f"bench{n}", ["up", "--gpu", "t4", "--run-id", f"bench{n}", "--yes"]))
        if "warm" in kinds:
            found.append((f"wup{n}", ["up", "--env", "lab", "--run-id", f"wup{n}", "--yes"]))
            found.append((f"wtest{n}", ["test", "--env", "lab", "--yes"]))
            validate = ["validate", "--env", "lab", "--image", IMAGE, "--gpu", "t4", "--yes"]
            found.append((f"wval{n}", validate))
        if "run" in kinds:
            found.append((f"run{n}", ["run", "--gpu", "t4", "--run-id", f"run{n}", "--yes", *line]))
        if "warm-run" in kinds:
            found.append((f"wrun{n}", ["run", "--env", "lab", "--run-id", f"wrun{n}", "--yes", *line]))
    return found


def one_scale(
    scale: float, runs: int, stall: float, kinds: list[str], run_seconds: float = 1.0, polling: str = "0.02"
) -> list[dict[str, Any]]:
    os.environ["ACAGPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="acagpu-cost-bench-")
    server = EmulatorServer(time_scale=scale, workload="simulated")
    server.start()
    try:
        for key, value in server.client_env().items():
            os.environ[key] = value
        if polling == "default":  # what a user meets: the client's own default polling
            os.environ.pop("ACAGPU_POLLING_INTERVAL", None)
        else:
            os.environ["ACAGPU_POLLING_INTERVAL"] = polling
        if any(k.startswith("warm") for k in kinds):
            _invoke("env", "create", "lab", "--gpu", "t4", "--yes", "-o", "json")
        printed: dict[str, float] = {}
        kind_of: dict[str, str] = {}
        for label, args in _journeys(kinds, runs, run_seconds):
            doc = _invoke(args[0], "-o", "json", *args[1:])  # before `--`: after it is the command
            printed[doc["run_id"]] = float((doc.get("cost") or {}).get("gpu_seconds") or 0.0)
            kind_of[doc["run_id"]] = label
        if stall:
            server.set_faults(f"stall:seconds={stall:g},match=gpu-tester")
            _invoke("up", "--gpu", "t4", "--run-id", "stalled", "--yes", "-o", "json")
            server.set_faults("")
        billing = server.billing()
        rows: list[dict[str, Any]] = _invoke("cost", "-o", "json")["runs"]
        for row in rows:
            billed = sum(
                r["wall_seconds"] * r["gpus"] for r in billing["replicas"] if r["run_id"] == row["run_id"]
            )
            row["journey"] = kind_of.get(row["run_id"], row["run_id"])
            row["gpu_printed"], row["gpu_billed"] = printed.get(row["run_id"]), billed
        return rows
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="0.005,0.02,0.05")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--stall", type=float, default=0.0)
    parser.add_argument("--kinds", default="cold")
    parser.add_argument("--run-seconds", type=float, default=1.0, help="acagpu run's container sleeps this")
    parser.add_argument(
        "--polling", default="0.02", help="ACAGPU_POLLING_INTERVAL in seconds, or `default` (unset: 5 s)"
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    print(
        f"{'scale':>6} {'run':<8} {'journey':<8} {'estimate $':>11} {'billed $':>11} {'diff %':>7} "
        f"{'GPU-s':>6} {'billed':>7} {'gpu %':>6}  status"
    )
    for scale in (float(s) for s in args.scales.split(",")):
        began = time.monotonic()
        rows = one_scale(scale, args.runs, args.stall, kinds, args.run_seconds, args.polling)
        for r in rows:
            printed, billed = r.get("gpu_printed"), r.get("gpu_billed") or 0.0
            gpu = f"{100 * (printed - billed) / billed:+6.1f}" if printed is not None and billed else "     -"
            print(
                f"{scale:>6g} {r['run_id']:<8} {r['journey']:<8} {r['estimate_usd']:>11.6f} "
                f"{r['billed_usd']:>11.6f} {r['difference_pct']:>+7.1f} "
                f"{printed if printed is not None else float('nan'):>6.2f} {billed:>7.2f} {gpu}  "
                f"{r['status']}"
            )
        normal = [abs(r["difference_pct"]) for r in rows if r["run_id"] != "stalled"]
        print(
            f"{scale:>6g} median |diff| of normal runs {statistics.median(normal):.1f} %, "
            f"worst {max(normal):.1f} % ({time.monotonic() - began:.1f} s wall)"
        )


if __name__ == "__main__":
    main()
