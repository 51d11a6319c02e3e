#!/usr/bin/env python3
"""How a card settles rate after rate: a trace of the tester's own chunks, dtype after dtype.

Run on a GPU machine (torch with CUDA; imports the tester script, nothing else):

    python3 benchmarks/tester_phases.py --tester templates/gpu-tester/gpu_tester.py \\
        --seconds 10,6,6,6 --json trace.json

From a card at rest, runs the tester's bf16, fp16, tf32 and fp32 products back to back in its own
50 ms CUDA-event-timed chunks (the tester's operands and chunk sizing) for the seconds given, and
records every chunk (end time, ms, flops) and an NVML sample every 20 ms (SM clock, power). It prints
each dtype in 0.25 s bins, then replays the tester's settle rule (`_settled`) over the trace for
each settle period given in --periods: when each dtype would have settled, and how far a window of
each length in --windows right after that point lies from the dtype's last --tail seconds (its
sustained rate). The tester's plan (periods, warm-up caps, windows) was chosen from these figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from typing import Any


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trace(t: Any, torch: Any, seconds: dict[str, float], n: int) -> dict[str, Any]:
    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(dev)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
    nvml, why = t.Nvml.open()
    sampler = t.Sampler(nvml, nvml.handle(props, 0), 0.02) if nvml else None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    chunks: dict[str, list[tuple[float, float, float]]] = {}
    began = time.monotonic()
    if sampler is not None:
        sampler.start(0.02)
    for name, secs in seconds.items():
        dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        dt = dtype[name]
        half = name in ("fp16", "bf16")
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        item = torch.tensor([], dtype=dt).element_size()
        sets = max(2, min(8, math.ceil(2 * l2 / (2 * n * n * item)) + 1))
        gen = torch.Generator(device=dev).manual_seed(1234 + n)
        a = [t.operands(torch, n, dt, gen, half) for _ in range(sets)]
        b = [t.operands(torch, n, dt, gen, half) for _ in range(sets)]
        c = torch.empty(n, n, device=dev, dtype=dt)
        i = 0

        def chunk(calls: int, a: Any = a, b: Any = b, c: Any = c, sets: int = sets) -> float:
            nonlocal i
            start.record()
            for _ in range(calls):
                torch.mm(a[i % sets], b[i % sets], out=c)
                i += 1
            end.record()
            end.synchronize()
            return max(start.elapsed_time(end), 1e-6)

        chunk(3)
        calls = max(1, math.ceil(50.0 / (chunk(3) / 3)))
        rows = chunks.setdefault(name, [])
        t0 = time.monotonic()
        while time.monotonic() - t0 < secs:
            ms = chunk(calls)
            rows.append((time.monotonic() - began, ms, calls * 2.0 * n**3))
    samples: list[tuple[float, Any, Any]] = []
    if sampler is not None:
        sampler.stop()
        samples = [(ts - began, s[0], s[2]) for ts, s in zip(sampler.times, sampler.samples)]  # noqa: B905
        nvml.close()
    return {"n": n, "chunks": chunks, "samples": samples, "nvml": why or "ok"}


def rate(rows: list[tuple[float, float, float]]) -> float:
    return sum(f for _, _, f in rows) / (sum(ms for _, ms, _ in rows) * 1e-3) / 1e12 if rows else 0.0


def replay(t: Any, doc: dict[str, Any], periods: list[float], windows: list[float], tail: float) -> None:
    class Replayed:  # the sampler's `between`, over the recorded samples
        def between(self, lo: float, hi: float) -> list[tuple[Any, ...]]:
            return [(sm, 0, w, 0, 0, 0) for ts, sm, w in doc["samples"] if lo <= ts < hi]

    sampler = Replayed() if doc["samples"] else None
    for name, rows in doc["chunks"].items():
        rows = [tuple(r) for r in rows]
        t_start = rows[0][0] - rows[0][1] / 1e3
        sustained = rate([r for r in rows if r[0] >= rows[-1][0] - tail])
        bins: list[str] = []
        k = 0
        while True:
            lo = t_start + 0.25 * k
            inside = [r for r in rows if lo <= r[0] < lo + 0.25]
            if not inside:
                break
            sm = [s[1] for s in doc["samples"] if lo <= s[0] < lo + 0.25 and s[1]]
            pw = [s[2] for s in doc["samples"] if lo <= s[0] < lo + 0.25 and s[2]]
            clock = f"/{sorted(sm)[len(sm) // 2]}MHz/{sorted(pw)[len(pw) // 2]:.0f}W" if sm and pw else ""
            bins.append(f"{rate(inside):.1f}{clock}")
            k += 1
        print(f"{name}: sustained (last {tail:g}s) {sustained:.2f} TFLOP/s; 0.25 s bins: {' '.join(bins)}")
        for period in periods:
            how = t.Steady(1.0, period, 99.0)
            settled_at = None
            for j in range(len(rows)):
                if rows[j][0] - t_start >= 3 * period and t._settled(rows[: j + 1], sampler, how):
                    settled_at = rows[j][0]
                    break
            if settled_at is None:
                print(f"  period {period:g}s: never settled")
                continue
            errs = []
            for w in windows:
                win = [r for r in rows if settled_at < r[0] <= settled_at + w]
                errs.append(f"{w:g}s window {100 * (rate(win) / sustained - 1):+.2f}%")
            print(f"  period {period:g}s: settled after {settled_at - t_start:.2f}s; " + ", ".join(errs))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--tester", default="templates/gpu-tester/gpu_tester.py")
    p.add_argument("--dtypes", default="bf16,fp16,tf32,fp32")
    p.add_argument("--seconds", default="10,6,6,6", help="seconds of load per dtype, in order")
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--periods", default="1,0.5,0.25")
    p.add_argument("--windows", default="1,2,3")
    p.add_argument("--tail", type=float, default=2.0, help="the sustained rate: the last seconds of a dtype")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--replay", metavar="FILE", help="replay a saved trace instead of measuring")
    args = p.parse_args()
    t = load(args.tester)
    if args.replay:
        with open(args.replay, encoding="utf-8") as fh:
            doc = json.load(fh)
    else:
        import torch

        secs = [float(x) for x in args.seconds.split(",")]
        doc = trace(t, torch, dict(zip(args.dtypes.split(","), secs)), args.size)  # noqa: B905
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
    periods = [float(x) for x in args.periods.split(",")]
    windows = [float(x) for x in args.windows.split(",")]
    replay(t, doc, periods, windows, args.tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
