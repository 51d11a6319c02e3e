"""`acagpu report RUN.json --html`: time and size of the page for a fan-out of N shards.

The document has the shape `acagpu run --shards N -o json` writes (shards[].attempts[] with
`started_at`, `start_s`, `seconds`, `gpu_seconds`; one shard in 25 retried, one in 100 failed),
made up with a fixed seed so every run draws the same page. The promise: 10,000 shards render in
under 2 s into under 5 MB. Rendering goes through the real CLI (`report render`) in-process, once
to warm up and then `--runs` times; the median is printed.

Usage: python benchmarks/report_html.py [--shards 10000] [--runs 5] [--keep PAGE.html]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PER_SECOND_USD = 0.000264  # about a T4's list price per second: only the curve's scale depends on it


def fanout_document(shards: int, seed: int = 7, parallel: int = 50) -> dict[str, Any]:
    """A fan-out's `-o json` document: `parallel` shards at a time, placing 20-60 s, running 30-90 s."""
    rng = random.Random(seed)
    origin = 1_790_000_000.0
    lanes = [0.0] * parallel
    docs = []
    for index in range(shards):
        attempts = []
        tries = 2 if index % 25 == 7 else 1
        failed_for_good = index % 100 == 42
        for number in range(1, tries + 1):
            lane = min(range(parallel), key=lanes.__getitem__)
            start = lanes[lane] + rng.uniform(0.0, 2.0)
            start_s = rng.uniform(20.0, 60.0)
            run = rng.uniform(30.0, 90.0)
            last = number == tries
            ok = last and not failed_for_good
            attempts.append({
                "attempt": number, "execution": f"job-x{index}-{number}",
                "status": "succeeded" if ok else "failed",
                "fault": None if ok else ("user" if last else "platform"),
                "exit_code": 0 if ok else (3 if last else None),
                "reason": None if ok else ("exit 3" if last else "ReplicaLost"),
                "seconds": round(start_s + run, 3), "gpu_seconds": round(run, 3),
                "start_s": round(start_s, 3), "started_at": round(origin + start, 3),
            })  # fmt: skip
            lanes[lane] = start + start_s + run
        gpu_s = sum(a["gpu_seconds"] for a in attempts)
        last_attempt = attempts[-1]
        docs.append({
            "index": index, "status": last_attempt["status"], "fault": last_attempt["fault"],
            "exit_code": last_attempt["exit_code"], "reason": last_attempt["reason"], "attempts": attempts,
            "user_retries": 0, "platform_retries": tries - 1, "gpu_seconds": round(gpu_s, 3),
            "usd_estimate": round(gpu_s * PER_SECOND_USD, 6), "output_path": None,
        })  # fmt: skip
    failed = [d["index"] for d in docs if d["status"] != "succeeded"]
    gpu_total = sum(d["gpu_seconds"] for d in docs)
    return {
        "schema": 1, "command": "run", "mode": "fanout", "run_id": "bench1",
        "status": "failed" if failed else "ok",
        "location": "westus3",
        "summary": {"shards": shards, "succeeded": shards - len(failed), "failed": len(failed),
                    "failed_indexes": failed, "attempts": sum(len(d["attempts"]) for d in docs)},
        "shards": docs,
        "phases": {"preflight": 0.6, "environment": 96.0, "shards": max(lanes), "teardown": 21.0},
        "cost": {"gpu_seconds": round(gpu_total, 3), "usd_estimate": round(gpu_total * PER_SECOND_USD, 6)},
        "error": None,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="keep the page here")
    args = parser.parse_args()
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    with tempfile.TemporaryDirectory() as work:
        source, page = Path(work) / "run.json", Path(work) / "run.html"
        source.write_text(json.dumps(fanout_document(args.shards)), encoding="utf-8")
        samples = []
        for _ in range(args.runs + 1):
            start = time.perf_counter()
            result = CliRunner().invoke(cli, ["report", str(source), "--html", str(page)])
            samples.append(time.perf_counter() - start)
            if result.exit_code != 0:
                sys.exit(f"report exited {result.exit_code}: {result.output}")
        size = page.stat().st_size
        if args.keep:
            args.keep.write_bytes(page.read_bytes())
    median = statistics.median(samples[1:])
    print(
        f"{args.shards} shards: render median {median:.3f} s (min {min(samples[1:]):.3f}, "
        f"{args.runs} runs), page {size / 1e6:.2f} MB"
    )
    print(f"limits: < 2 s and < 5 MB: {'met' if median < 2.0 and size < 5e6 else 'NOT MET'}")


if __name__ == "__main__":
    main()
