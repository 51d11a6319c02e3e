"""`acagpu serve` cold starts against the emulator at the `aca-2026` durations: a public image against
a staged one, and `--min-replicas 0` against 1 (latency and $/month side by side).

For each of a public image (pulled from Docker Hub, no cache across replicas: the emulator's default
pull model) and the same image staged in the warm environment's registry (`acagpu image stage`):
`acagpu serve --env lab` of a stdlib HTTP stand-in that loads for `--load` real seconds, then
`serve --run-id ... --measure N`. Each cycle's figures are read back on the platform's clock: the
pull from the kubelet's own `Successfully pulled image ... in Xs` message (emulated seconds,
exact), the rest of the platform's part from the event stamps (whole wall seconds, so coarse at
fast time scales) divided by the time scale; the model's load is real seconds. `--min-replicas 1`
is measured as warm requests to the kept replica, with its monthly cost from the price table.

Usage: python benchmarks/serve_coldstart.py [--time-scale 0.05] [--cycles 10] [--load 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.emulator.server import EmulatorServer

IMAGE = "vllm/vllm-openai:v0.6.0"  # 3.3 GB by the emulator's size table
STANDIN = """
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def acagpu(*args: str, image: str | None = None) -> dict[str, Any]:
    where = args.index(image) if image in args else len(args)
    result = CliRunner().invoke(cli, [*args[:where], "-o", "json", *args[where:]])
    if result.exit_code != 0:
        sys.exit(f"acagpu {' '.join(args)}: exit {result.exit_code}\n{result.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return round(ordered[max(0, -(-p * len(ordered) // 100) - 1)], 1) if ordered else float("nan")


def platform_view(cycle: dict[str, Any], scale: float) -> dict[str, float]:
    """A cycle on the platform's clock: the pull from its message, the other platform phases from
    the stamps (÷ scale), the load and answer as measured (real seconds)."""
    phases = {p["phase"]: p for p in cycle["phases"]}
    pull = float((cycle.get("image_pull") or {}).get("seconds") or 0.0)
    before = sum(phases[n]["seconds"] for n in ("request to scheduling", "placement") if n in phases) / scale
    start = phases["container start"]["seconds"] / scale if "container start" in phases else 0.0
    load = sum(phases[n]["seconds"] for n in ("load and first byte", "answer") if n in phases)
    return {
        "scheduling_s": before,
        "pull_s": pull,
        "container_start_s": start,
        "load_and_answer_s": load,
        "platform_total_s": before + pull + start + load,
    }


def serve_and_measure(tag: str, run_id: str, cycles: int, load: float, script: Path) -> dict[str, Any]:
    port = str(free_port())
    acagpu(
        "serve", "--env", "lab", "--run-id", run_id, "--port", port, "--cooldown", "10", "--yes",
        IMAGE, "--", "python3", str(script), port, str(load), image=IMAGE,
    )  # fmt: skip
    doc = acagpu("serve", "--run-id", run_id, "--measure", str(cycles), "--requests", "50")
    acagpu("down", "--run-id", run_id, "--yes")
    return {"tag": tag, "measurement": doc["measurement"], "price": doc["price"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--load", type=float, default=2.0, help="the stand-in's load, real seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="acagpu-serve-bench-"))
    script = work / "standin.py"
    script.write_text(STANDIN, encoding="utf-8")
    os.environ["ACAGPU_CACHE_DIR"] = str(work / "cache")
    os.environ.pop("ACAGPU_CONFIG", None)
    with EmulatorServer(
        time_scale=args.time_scale, durations="aca-2026", registered=True, workdir=work / "emu"
    ) as emu:
        os.environ.update(emu.client_env())
        os.environ["ACAGPU_POLLING_INTERVAL"] = "0.1"
        started = time.monotonic()
        acagpu("env", "create", "lab", "--yes")
        rows = [serve_and_measure("public (Docker Hub)", "pub1", args.cycles, args.load, script)]
        acagpu("image", "stage", IMAGE, "--env", "lab")
        rows.append(
            serve_and_measure("staged (same-region registry)", "stg1", args.cycles, args.load, script)
        )
        acagpu("env", "delete", "lab", "--yes")
        wall = time.monotonic() - started
    print(
        f"# serve cold starts: {IMAGE}, stand-in load {args.load:g} s, time scale {args.time_scale:g}, "
        f"durations aca-2026, {args.cycles} cycles each ({wall:.0f} s wall)"
    )
    print("| image | phase (platform s) | p50 | p95 |")
    print("|---|---|---|---|")
    for row in rows:
        views = [platform_view(c, args.time_scale) for c in row["measurement"]["cycles"]]
        for key in ("scheduling_s", "pull_s", "container_start_s", "load_and_answer_s", "platform_total_s"):
            values = [v[key] for v in views]
            print(f"| {row['tag']} | {key} | {pct(values, 50)} | {pct(values, 95)} |")
    warm = rows[-1]["measurement"]["warm"]
    per_hour = float(rows[-1]["price"]["usd_per_hour"] or 0.0)
    cold = [platform_view(c, args.time_scale)["platform_total_s"] for c in rows[-1]["measurement"]["cycles"]]
    print()
    print("| --min-replicas | first request after idle (s, p50 / p95) | $/month idle |")
    print("|---|---|---|")
    print(f"| 0 (staged) | {pct(cold, 50)} / {pct(cold, 95)} | 0.00 |")
    print(
        f"| 1 | {warm['total_s']['p50']} / {warm['total_s']['p95']} (a warm request) | {per_hour * 730:.2f} |"
    )
    print(
        "flagged cycles (cut off at the 240 s ingress timeout): "
        + ", ".join(f"{r['tag']}: {len(r['measurement']['flagged_cycles'])}" for r in rows)
    )


if __name__ == "__main__":
    main()
