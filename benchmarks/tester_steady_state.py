#!/usr/bin/env python3
"""Is the tester steady, and how fast? Default runs back to back, an independent loop, a burn.

Run on a GPU machine (needs torch with CUDA; stdlib + torch only, like the tester):

    python3 benchmarks/tester_steady_state.py --tester templates/gpu-tester/gpu_tester.py \\
        --runs 6 --burn 60

Prints, per run, every rate's TFLOP/s, the headline's burst, warm-up, window, samples, the elapsed
seconds and where they went (the tester's `phases`); then the spread of each rate over the runs
(max/min − 1), bf16 vs fp16, and each rate's mean against an independent loop that shares no code
with the tester: its own operands (normal values rounded to bf16 for fp16/bf16, the tester's
choice, plus full-mantissa fp16 for the data effect; plain normal values for tf32/fp32), a fixed
6 s warm-up, then three 3 s windows timed with CUDA events, the rate being work over time.
Targets (issue 36): every default run ≤ 20 s, each rate within 1 % of the loop, spread ≤ 1 %.
Last, one `--burn` run (`--burn 0`: none). JSON of everything goes to --json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

TAG = "ACAGPU_RESULT"


def tester_run(path: str, extra: list[str]) -> tuple[dict[str, Any], float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, path, *extra],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "ACAGPU_RESULT_GRACE_S": "0"},
    )
    wall = time.monotonic() - began
    line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith(TAG)), None)
    if line is None:
        raise SystemExit(f"no result line; stdout tail:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(line[len(TAG) :]), wall


class Chunks:
    """Matmuls on rotating operands in CUDA-event-timed chunks of 25."""

    def __init__(self, torch: Any, a: list[Any], b: list[Any], c: Any, n: int) -> None:
        self.torch, self.a, self.b, self.c, self.i = torch, a, b, c, 0
        self.s = torch.cuda.Event(enable_timing=True)
        self.e = torch.cuda.Event(enable_timing=True)

    def run_for(self, seconds: float) -> tuple[float, int]:
        calls, ms, t0 = 0, 0.0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            self.s.record()
            for _ in range(25):
                self.torch.mm(self.a[self.i % 4], self.b[self.i % 4], out=self.c)
                self.i += 1
            self.e.record()
            self.e.synchronize()
            ms += self.s.elapsed_time(self.e)
            calls += 25
        return ms, calls


def loop(n: int = 8192, warm_s: float = 6.0, window_s: float = 3.0, windows: int = 3) -> dict[str, float]:
    import torch

    dev = torch.device("cuda", 0)
    gen = torch.Generator(device=dev).manual_seed(7)
    out: dict[str, float] = {}
    for label, dtype, rounded in (
        ("bf16", torch.bfloat16, True),
        ("fp16", torch.float16, True),
        ("fp16_full_mantissa", torch.float16, False),
        ("tf32", torch.float32, False),
        ("fp32", torch.float32, False),
    ):
        torch.backends.cuda.matmul.allow_tf32 = label == "tf32"

        def make(dtype: Any = dtype, rounded: bool = rounded) -> Any:
            x = torch.randn(n, n, device=dev, generator=gen)
            return (x.to(torch.bfloat16) if rounded else x).to(dtype)

        a, b = [make() for _ in range(4)], [make() for _ in range(4)]
        c = torch.empty(n, n, device=dev, dtype=dtype)
        clock = Chunks(torch, a, b, c, n)
        run_for = clock.run_for

        run_for(warm_s)
        rates = []
        for _ in range(windows):
            ms, calls = run_for(window_s)
            rates.append(calls * 2 * n**3 / (ms * 1e-3) / 1e12)
        out[label] = round(sum(rates) / len(rates), 2)
        out[label + "_windows"] = [round(r, 2) for r in rates]  # type: ignore[assignment]
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def spread(values: list[float]) -> float:
    return round(100 * (max(values) / min(values) - 1), 2)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tester", default="templates/gpu-tester/gpu_tester.py")
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--burn", type=float, default=60.0)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    runs = []
    for k in range(args.runs):
        doc, wall = tester_run(args.tester, [])
        mm = doc["devices"][0]["matmul"]
        row = {
            "wall_s": round(wall, 1),
            "elapsed_s": doc.get("elapsed_s"),
            "status": doc["status"],
            "phases": doc.get("phases"),
            "skipped": doc.get("skipped"),
        }
        for d in ("fp32", "tf32", "fp16", "bf16"):
            if d in mm:
                r = mm[d]
                row[d] = r["tflops"]
                row[d + "_detail"] = {
                    k2: r.get(k2)
                    for k2 in (
                        "burst_tflops",
                        "warmup_s",
                        "window_s",
                        "settled",
                        "window_spread_pct",
                        "chunk_calls",
                    )
                } | {
                    "samples": (r.get("telemetry") or {}).get("samples"),
                    "sm_mhz": (r.get("telemetry") or {}).get("sm_clock_mhz"),
                    "power_w": (r.get("telemetry") or {}).get("power_w"),
                    "reasons": (r.get("telemetry") or {}).get("reasons"),
                }
        runs.append(row)
        print(
            f"run {k + 1}: bf16 {row.get('bf16')} fp16 {row.get('fp16')} tf32 {row.get('tf32')}"
            f" fp32 {row.get('fp32')}"
            f"  elapsed {row['elapsed_s']}s wall {row['wall_s']}s  bf16 {row.get('bf16_detail')}"
            f"  fp16 {row.get('fp16_detail')}  tf32 {row.get('tf32_detail')}  fp32 {row.get('fp32_detail')}"
            f"  phases {row['phases']}  skipped {row['skipped']}",
            flush=True,
        )
    independent = loop()
    print(f"independent loop: {independent}", flush=True)
    summary: dict[str, Any] = {}
    means: dict[str, float] = {}
    for d in ("bf16", "fp16", "tf32", "fp32"):
        got = [r[d] for r in runs if d in r]
        if not got:
            continue
        means[d] = sum(got) / len(got)
        summary[f"{d}_spread_pct"] = spread(got)
        summary[f"{d}_vs_loop_pct"] = round(100 * (means[d] / independent[d] - 1), 2)
    if "bf16" in means and "fp16" in means:
        summary["bf16_vs_fp16_pct"] = round(100 * (means["bf16"] / means["fp16"] - 1), 2)
    summary["max_elapsed_s"] = max(r["elapsed_s"] for r in runs)
    summary["max_wall_s"] = max(r["wall_s"] for r in runs)
    print(f"summary: {summary}", flush=True)
    burn = None
    if args.burn:
        doc, wall = tester_run(args.tester, ["--burn", str(args.burn)])
        burn = doc.get("burn")
        print(f"burn status {doc['status']} reason {doc.get('reason')} wall {wall:.1f}s", flush=True)
        for dev in (burn or {}).get("devices", []):
            print(
                f"burn gpu{dev['index']}: {dev['tflops']} TFLOP/s, {dev['checks']} checks, "
                f"{dev['errors']} errors, {dev['mismatches']} mismatches, "
                f"worst rel_err {dev['worst_rel_err']}",
                flush=True,
            )
            for row in dev["intervals"]:
                print(f"  {row}", flush=True)
        print(f"dcgm: {(burn or {}).get('dcgm')}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {"runs": runs, "independent": independent, "summary": summary, "burn": burn}, fh, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
