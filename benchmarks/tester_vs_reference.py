"""The gpu-tester's figures against independent references, on the same GPU, in one process.

A tester that under-reports makes a healthy GPU look broken; one that over-reports hides a bad
one. So its matmul rates are compared with `triton.testing.do_bench` and `torch.utils.benchmark`
(median of each, at the tester's size and one size up; the ratio is taken against the best
reference median at the tester's size) and its device copy with a plain large `copy_`. Each side
is measured twice, interleaved, and keeps its best. Last, the full default tester run is timed
wall-clock as a fresh process, CUDA start-up included.

Targets: bf16 and fp16 ≥ 0.97x the reference, device copy ≥ 0.95x, default run ≤ 45 s.
Usage: python benchmarks/tester_vs_reference.py [--json-out FILE] [--peaks FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "templates" / "gpu-tester" / "gpu_tester.py"
TARGETS = {"bf16": 0.97, "fp16": 0.97, "d2d": 0.95}


def load_tester() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_tester", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_matmul(torch: Any, name: str, n: int) -> dict[str, float]:
    """Median TFLOP/s of one plain torch.mm, by two independent timers."""
    import torch.utils.benchmark as tbench

    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        name
    ]
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    flop = 2 * n**3
    out: dict[str, float] = {}
    try:
        from triton.testing import do_bench

        ms = do_bench(lambda: torch.mm(a, b), warmup=100, rep=400, return_mode="median")
        out["do_bench"] = flop / (ms * 1e-3) / 1e12
    except ImportError:
        pass
    timer = tbench.Timer("torch.mm(a, b)", globals={"torch": torch, "a": a, "b": b})
    m = timer.blocked_autorange(min_run_time=0.4)
    out["torch_benchmark"] = flop / m.median / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def reference_copy(torch: Any, nbytes: int) -> float:
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    try:
        from triton.testing import do_bench

        ms = do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    except ImportError:
        import torch.utils.benchmark as tbench

        ms = tbench.Timer("d.copy_(s)", globals={"d": dst, "s": src}).blocked_autorange().median * 1e3
    return 2 * nbytes / (ms * 1e-3) / 1e9


def full_run(peaks: str | None) -> tuple[float, dict[str, Any] | None, int]:
    argv = [sys.executable, str(SCRIPT)] + (["--peaks", peaks] if peaks else [])
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    line = next((x for x in proc.stdout.splitlines() if x.startswith("ACAGPU_RESULT ")), None)
    return wall, (json.loads(line.split(" ", 1)[1]) if line else None), proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json-out", help="write every figure here as JSON")
    parser.add_argument("--peaks", help="datasheet peaks JSON handed to the full tester run")
    opts = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to compare", file=sys.stderr)
        return 2
    wall, result, rc = full_run(opts.peaks)  # first, so its CUDA start-up is cold like in a container
    tester = load_tester()
    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(dev)
    n = tester.choose_size(props, False)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
    free, _ = torch.cuda.mem_get_info(dev)
    rows: dict[str, dict[str, Any]] = {}
    for name in ("fp32", "tf32", "fp16", "bf16"):
        mine, refs = 0.0, {}
        for _ in range(2):
            mine = max(mine, tester.matmul_dtype(torch, dev, name, n, l2, 7, 40.0)["tflops"])
            for size in (n, 2 * n) if name in ("fp16", "bf16") else (n,):
                for k, v in reference_matmul(torch, name, size).items():
                    key = f"{k}@{size}"
                    refs[key] = max(refs.get(key, 0.0), v)
        best_same = max(v for k, v in refs.items() if k.endswith(f"@{n}"))
        rows[name] = {"tester": mine, "refs": refs, "ratio": mine / best_same, "best_any": max(refs.values())}
    nbytes = 1 << 30
    mine_bw, ref_bw = 0.0, 0.0
    for _ in range(2):
        mine_bw = max(mine_bw, tester.bandwidth(torch, dev, False, free)["d2d_gbps"])
        ref_bw = max(ref_bw, reference_copy(torch, nbytes))
    rows["d2d"] = {"tester": mine_bw, "refs": {"copy_@1GiB": ref_bw}, "ratio": mine_bw / ref_bw}

    env = {
        "gpu": props.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": tester.driver_release(),
        "matmul_size": n,
    }
    print(f"GPU {env['gpu']}, driver {env['driver']}, torch {env['torch']} (CUDA {env['cuda']}), n={n}")
    print(f"{'what':<6} {'tester':>10} {'reference best':>15} {'ratio':>6}  target  refs")
    ok = True
    for name, row in rows.items():
        unit = "GB/s" if name == "d2d" else "TFLOP/s"
        target = TARGETS.get(name)
        hit = target is None or row["ratio"] >= target
        ok &= hit
        refs = ", ".join(f"{k}={v:.1f}" for k, v in sorted(row["refs"].items()))
        best = row["tester"] / row["ratio"]
        print(
            f"{name:<6} {row['tester']:10.1f} {best:15.1f} {row['ratio']:6.3f}  "
            f"{'≥' + str(target) if target else '  -   '} {'ok' if hit else 'MISS'}  {refs} {unit}"
        )
    wall_ok = wall <= 45 and rc == 0
    ok &= wall_ok
    status = result["status"] if result else "no result"
    print(f"full default run: {wall:.1f} s wall (target ≤ 45 s) exit {rc}, status {status}")
    if opts.json_out:
        doc = {"env": env, "rows": rows, "full_run": {"wall_s": wall, "exit": rc, "result": result}}
        Path(opts.json_out).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
