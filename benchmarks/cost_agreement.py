"""Estimate against bill: `up` runs on the emulator, then `acagpu cost`, per time scale.

Usage: python benchmarks/cost_agreement.py [--scales 0.005,0.02,0.05] [--runs 2] [--stall 0]

For each time scale a fresh emulator (threaded, HTTPS) serves N T4 runs through the real CLI; then
`acagpu cost -o json` sets each run's estimate (what the run measured, priced at the table) beside
the emulator's Cost Management bill (the replicas' wall-clock lives at the same meters). With
`--stall SECONDS` one more run has its tester stall that long (emulated) between pull and create.
Prints one line per run and, per scale, the median absolute difference: the client's observation
lag (polling, the tester's first line, teardown's first calls) is constant in wall seconds, so it
weighs less as replicas live longer.
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
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def one_scale(scale: float, runs: int, stall: float) -> list[dict[str, Any]]:
    os.environ["ACAGPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="acagpu-cost-bench-")
    server = EmulatorServer(time_scale=scale, workload="simulated")
    server.start()
    try:
        for key, value in server.client_env().items():
            os.environ[key] = value
        os.environ["ACAGPU_POLLING_INTERVAL"] = "0.02"
        for n in range(runs):
            _invoke("up", "--gpu", "t4", "--run-id", f"bench{n}", "--yes", "-o", "json")
        if stall:
            server.set_faults(f"stall:seconds={stall:g},match=gpu-tester")
            _invoke("up", "--gpu", "t4", "--run-id", "stalled", "--yes", "-o", "json")
            server.set_faults("")
        rows: list[dict[str, Any]] = _invoke("cost", "-o", "json")["runs"]
        return rows
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="0.005,0.02,0.05")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--stall", type=float, default=0.0)
    args = parser.parse_args()
    print(f"{'scale':>6} {'run':<8} {'estimate $':>11} {'billed $':>11} {'diff %':>7}  status")
    for scale in (float(s) for s in args.scales.split(",")):
        began = time.monotonic()
        rows = one_scale(scale, args.runs, args.stall)
        for r in rows:
            print(
                f"{scale:>6g} {r['run_id']:<8} {r['estimate_usd']:>11.6f} {r['billed_usd']:>11.6f} "
                f"{r['difference_pct']:>+7.1f}  {r['status']}"
            )
        normal = [abs(r["difference_pct"]) for r in rows if r["run_id"] != "stalled"]
        print(
            f"{scale:>6g} median |diff| of normal runs {statistics.median(normal):.1f} % "
            f"({time.monotonic() - began:.1f} s wall)"
        )


if __name__ == "__main__":
    main()
