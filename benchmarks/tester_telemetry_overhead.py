#!/usr/bin/env python3
"""What the gpu-tester's NVML sampling costs the rate it measures, side by side in one run.

Three parts, all on GPU 0:
1. In-process: the tester's own bf16 measurement (`matmul_dtype`, the default size, repeats and loop
   length) with and without the sampler, interleaved in ABBA order over `--pairs` pairs, so clock
   drift and warm-up hit both arms alike. Overhead = 1 - median(with) / median(without).
2. Whole tester: `gpu_tester.py --dtypes bf16` as a fresh process with `--telemetry-ms 20` and with
   `--telemetry-ms 0`, interleaved over `--runs` pairs; the bf16 rate each process reported.
3. The default run (`gpu_tester.py --peaks …`, default result grace) timed wall-clock, its output kept.

Run on a GPU host from the repository root:
    python3 benchmarks/tester_telemetry_overhead.py --peaks tests/fixtures/tester/gpus.json \
        --json-out bench.json --default-out default.txt
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "templates" / "gpu-tester" / "gpu_tester.py"


def load_tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester_bench", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process(tester: Any, pairs: int, interval_ms: int) -> dict[str, Any]:
    import torch

    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(dev)
    n = tester.choose_size(props, False)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
    nvml, why = tester.Nvml.open()
    if nvml is None:
        raise SystemExit(f"NVML unavailable: {why}")
    handle = nvml.handle(props, 0)
    sampler = tester.Sampler(nvml, handle, interval_ms / 1000)
    # the cost of one sample, on its own
    start = time.perf_counter()
    for _ in range(200):
        nvml.sample(handle)
    per_sample_ms = (time.perf_counter() - start) / 200 * 1e3
    on: list[float] = []
    off: list[float] = []
    samples: list[int] = []
    tester.matmul_dtype(torch, dev, "bf16", n, l2, 7, 40.0)  # one throw-away: cuBLAS and clocks settle
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        for sampled in order:
            row = tester.matmul_dtype(torch, dev, "bf16", n, l2, 7, 40.0, sampler if sampled else None)
            (on if sampled else off).append(row["tflops"])
            if sampled:
                samples.append(row["telemetry"]["samples"])
    nvml.close()
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    return {
        "gpu": props.name,
        "n": n,
        "pairs": pairs,
        "interval_ms": interval_ms,
        "per_sample_ms": round(per_sample_ms, 3),
        "samples_per_measurement": statistics.median(samples),
        "with_tflops": on,
        "without_tflops": off,
        "median_with": round(statistics.median(on), 2),
        "median_without": round(statistics.median(off), 2),
        "overhead_pct": round(100 * (1 - statistics.median(on) / statistics.median(off)), 2),
        "paired_ratio_median": round(statistics.median(ratios), 4),
    }


def tester_process(args: list[str], grace: str = "0") -> tuple[dict[str, Any], float, str]:
    env = {**os.environ, "ACAGPU_RESULT_GRACE_S": grace, "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    wall = time.monotonic() - start
    line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("ACAGPU_RESULT "))
    return json.loads(line.split(" ", 1)[1]), wall, proc.stdout


def whole_runs(runs: int, peaks: str) -> dict[str, Any]:
    base = ["--dtypes", "bf16", "--peaks", peaks, "--cpu-budget", "0.2"]
    on: list[float] = []
    off: list[float] = []
    for i in range(runs):
        order = ("20", "0") if i % 2 == 0 else ("0", "20")
        for ms in order:
            doc, _, _ = tester_process([*base, "--telemetry-ms", ms])
            (on if ms != "0" else off).append(doc["tflops"]["bf16"])
    return {
        "runs": runs,
        "with_tflops": on,
        "without_tflops": off,
        "median_with": round(statistics.median(on), 2),
        "median_without": round(statistics.median(off), 2),
        "overhead_pct": round(100 * (1 - statistics.median(on) / statistics.median(off)), 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peaks", default=str(ROOT / "tests" / "fixtures" / "tester" / "gpus.json"))
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--interval-ms", type=int, default=20)
    p.add_argument("--json-out")
    p.add_argument("--default-out", help="keep the default run's stdout here")
    args = p.parse_args()
    tester = load_tester()
    report: dict[str, Any] = {"in_process": in_process(tester, args.pairs, args.interval_ms)}
    print(json.dumps(report["in_process"]), flush=True)
    report["whole_tester"] = whole_runs(args.runs, args.peaks)
    print(json.dumps(report["whole_tester"]), flush=True)
    doc, wall, out = tester_process(
        ["--peaks", args.peaks], grace=os.environ.get("ACAGPU_RESULT_GRACE_S", "")
    )
    report["default_run"] = {
        "wall_s": round(wall, 1),
        "elapsed_s": doc["elapsed_s"],
        "result_grace_s": doc.get("result_grace_s"),
        "status": doc["status"],
    }
    print(json.dumps(report["default_run"]), flush=True)
    if args.default_out:
        Path(args.default_out).write_text(out, encoding="utf-8")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
