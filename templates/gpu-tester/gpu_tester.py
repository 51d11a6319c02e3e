#!/usr/bin/env python3
"""acagpu gpu-tester: a short, honest GPU check that prints one machine-readable result line.

Standalone on purpose (stdlib + torch only, never acagpu): the same file runs under
`docker run --gpus all`, `apptainer exec --nv`, as an Azure Container Apps job, injected into a
public PyTorch image through an environment variable, and directly on a GPU host.

Every GPU figure is taken the same way: warm-up first, CUDA events around a loop of N iterations,
the median over several repeats, random inputs (never zeros), and input buffers rotated so their
total exceeds the L2 cache. The README beside this file documents the output schema.
Exit codes: 0 pass, 1 fail, 2 bad arguments.
"""

from __future__ import annotations  # annotations stay strings: runs on Python 3.8+ images

import argparse
import ctypes
import ctypes.util
import glob
import json
import math
import os
import platform
import socket
import statistics
import sys
import time
from typing import Any

TESTER_VERSION = "1.0"
SCHEMA = 1
RESULT_TAG = "ACAGPU_RESULT"
DTYPES = ("fp32", "tf32", "fp16", "bf16")
# ‖out − ref‖ / ‖ref‖ against a float64 product of the same (rounded) inputs. fp32 lands far below
# its bound; tf32 rounds operands to 10 mantissa bits; fp16/bf16 also round the output.
ERROR_BOUNDS = {"fp32": 1e-4, "tf32": 3e-3, "fp16": 5e-3, "bf16": 1.5e-2}
PEAK_KEYS = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "fp16": "fp16_tflops", "bf16": "bf16_tflops"}
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MIB = 1 << 20
T0 = time.monotonic()


def say(line: str) -> None:
    print(line, flush=True)


# -- arguments ---------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_tester.py",
        description="Measure a GPU honestly: matmul TFLOP/s per dtype, memory bandwidth, CPU baseline.",
    )
    p.add_argument("--budget", type=float, default=45.0, help="wall-clock bound for the whole run, s")
    p.add_argument("--quick", action="store_true", help="smallest useful run (fewer repeats, smaller sizes)")
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is not a failure (CPU part only)")
    p.add_argument("--peaks", metavar="FILE", help="datasheet peaks JSON (default: $ACAGPU_PEAKS text)")
    p.add_argument("--size", type=int, default=0, help="GPU matmul size n (n×n×n); 0 = chosen per GPU")
    p.add_argument("--repeats", type=int, default=0, help="timed repeats per measurement; 0 = automatic")
    p.add_argument("--dtypes", default=",".join(DTYPES), help="comma list from fp32,tf32,fp16,bf16")
    p.add_argument("--no-allreduce", action="store_true", help="skip the multi-GPU NCCL all-reduce")
    p.add_argument("--cpu-budget", type=float, default=0.0, help="seconds for the CPU baseline; 0 = auto")
    args = p.parse_args(argv)
    bad = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if bad:
        p.error(f"unknown dtype(s): {','.join(bad)} (choose from {','.join(DTYPES)})")
    if not 1.0 <= args.budget <= 86400:
        p.error("--budget must be between 1 and 86400 seconds")
    if args.size and not 256 <= args.size <= 65536:
        p.error("--size must be between 256 and 65536")
    if args.repeats and not 1 <= args.repeats <= 1000:
        p.error("--repeats must be between 1 and 1000")
    if args.cpu_budget < 0:
        p.error("--cpu-budget must not be negative")
    args.dtype_list = [d for d in DTYPES if d in args.dtypes.split(",")]
    return args


def load_peaks(path: str | None) -> dict[str, Any]:
    """The datasheet table, by exact name and alias; {} when none was given (then no percentages)."""
    text = None
    if path:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    elif os.environ.get("ACAGPU_PEAKS"):
        text = os.environ["ACAGPU_PEAKS"]
    if not text:
        return {}
    doc = json.loads(text)
    gpus = doc.get("gpus", doc) if isinstance(doc, dict) else {}
    table: dict[str, Any] = {}
    for name, row in gpus.items():
        if not isinstance(row, dict):
            continue
        table[name.strip().lower()] = row
        for alias in row.get("aliases") or []:
            table.setdefault(str(alias).strip().lower(), row)
    return table


def pct(value: float | None, peak: Any) -> float | None:
    if value is None or not isinstance(peak, (int, float)) or peak <= 0:
        return None
    return round(100.0 * value / peak, 1)


def of_peak(value: float | None) -> str:
    return f" ({value}% of peak)" if value is not None else ""


# -- environment -------------------------------------------------------------------------------


def _cudart_candidates() -> list[str]:
    """The image's own libcudart (nvidia/cuda images), never the copy bundled inside torch's wheel."""
    found: list[str] = []
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    roots += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "targets/*/lib"):
            for path in sorted(glob.glob(os.path.join(root, sub, "libcudart.so*")), reverse=True):
                if ".so.debug" not in path and path not in found:
                    found.append(path)
    name = ctypes.util.find_library("cudart")
    if name and name not in found:
        found.append(name)
    return found


def probe_cudart() -> dict[str, Any]:
    """Ask the image's toolkit itself whether it can talk to the driver (a deviceQuery in ctypes)."""
    out: dict[str, Any] = {"found": False, "path": None}
    for path in _cudart_candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        out.update(found=True, path=os.path.realpath(path) if os.sep in path else path)
        runtime, driver, count = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        rc = lib.cudaRuntimeGetVersion(ctypes.byref(runtime))
        out["runtime_version"] = _cuda_version(runtime.value) if rc == 0 else None
        rc = lib.cudaDriverGetVersion(ctypes.byref(driver))
        out["driver_version"] = _cuda_version(driver.value) if rc == 0 and driver.value else None
        rc = lib.cudaGetDeviceCount(ctypes.byref(count))
        out["device_count"] = count.value if rc == 0 else 0
        out["error"] = None if rc == 0 else lib.cudaGetErrorName(rc).decode()
        return out
    return out


def _cuda_version(code: int) -> str:
    return f"{code // 1000}.{(code % 1000) // 10}"


def driver_release() -> str | None:
    """The driver's release string (e.g. 535.54.03), via NVML or /proc, so no nvidia-smi is needed."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() == 0:
            buf = ctypes.create_string_buffer(96)
            rc = nvml.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96))
            nvml.nvmlShutdown()
            if rc == 0:
                return buf.value.decode()
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            for word in fh.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return None


def driver_cuda() -> str | None:
    """The highest CUDA version the driver supports (libcuda's cuDriverGetVersion)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value:
            return _cuda_version(value.value)
    except (OSError, AttributeError):
        pass
    return None


def environment(torch: Any) -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__ if torch else None,
        "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "driver": driver_release(),
        "driver_cuda": driver_cuda(),
        "cpu_count": os.cpu_count(),
    }


# -- timing ------------------------------------------------------------------------------------


class Clock:
    """Deadlines inside the run's budget, so a slow GPU or CPU shortens the run instead of overrunning."""

    def __init__(self, budget: float) -> None:
        self.budget = budget

    def left(self) -> float:
        return self.budget - (time.monotonic() - T0)


def time_gpu(torch: Any, step: Any, *, target_ms: float, repeats: int, warm_ms: float) -> float:
    """Median milliseconds per call of `step(i)`: warm-up, then events around loops of N calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    i, spent = 0, 0.0
    # warm-up until at least warm_ms of device work ran (clocks ramp, cuBLAS picks its kernel)
    while True:
        start.record()
        for _ in range(3):
            step(i)
            i += 1
        end.record()
        end.synchronize()
        spent += start.elapsed_time(end)
        if spent >= warm_ms:
            break
    per_call = max(start.elapsed_time(end) / 3, 1e-3)
    iters = max(1, min(200, math.ceil(target_ms / per_call)))
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(iters):
            step(i)
            i += 1
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)


# -- CPU baseline ------------------------------------------------------------------------------


def cpu_baseline(torch: Any, budget_s: float) -> dict[str, Any]:
    """fp32 matmul GFLOP/s at the largest size whose repeats fit the small budget (never minutes)."""
    deadline = time.monotonic() + budget_s
    n, best = 128, None
    while n <= 8192:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up (thread pool, allocator)
        times = []
        for _ in range(3):
            t = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        best = {"size": n, "median_ms": round(med * 1e3, 4), "gflops": round(2 * n**3 / med / 1e9, 2)}
        # the next size costs ~8x; stop when 4 of those calls would not fit what is left
        if time.monotonic() + 8 * med * 4 > deadline or med > 0.5:
            break
        n *= 2
    assert best is not None
    best["threads"] = torch.get_num_threads()
    return best


# -- GPU measurements --------------------------------------------------------------------------


def bf16_native(torch: Any) -> bool:
    """bf16 in hardware (Ampere and newer); emulated bf16 on a T4 would only measure the emulation."""
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # torch < 2.3 has no emulation flag and answers for the hardware
        return bool(torch.cuda.is_bf16_supported())


def choose_size(props: Any, quick: bool) -> int:
    """Large enough to fill the chip: 8192 on data-center parts, 4096 on small ones or --quick."""
    big = props.multi_processor_count >= 80 and props.total_memory >= 30 * (1 << 30)
    return 8192 if big and not quick else 4096


def matmul_dtype(
    torch: Any, dev: Any, name: str, n: int, l2_bytes: int, repeats: int, target_ms: float
) -> dict[str, Any]:
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        name
    ]
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    item = torch.tensor([], dtype=dtype).element_size()
    pair = 2 * n * n * item
    sets = max(2, min(8, math.ceil(2 * l2_bytes / pair) + 1))
    gen = torch.Generator(device=dev).manual_seed(1234 + n)
    a = [torch.randn(n, n, device=dev, dtype=dtype, generator=gen) for _ in range(sets)]
    b = [torch.randn(n, n, device=dev, dtype=dtype, generator=gen) for _ in range(sets)]
    c = torch.empty(n, n, device=dev, dtype=dtype)

    def step(i: int) -> None:
        torch.mm(a[i % sets], b[i % sets], out=c)

    ms = time_gpu(torch, step, target_ms=target_ms, repeats=repeats, warm_ms=min(150.0, 4 * target_ms))
    # correctness on fresh inputs: poison the output, check every element was written, then a
    # sample of rows x columns against float64 products of the same inputs
    x = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    y = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    c.fill_(float("nan"))
    torch.mm(x, y, out=c)
    written = bool(torch.isfinite(c).all().item())
    rows = torch.randperm(n, device=dev, generator=gen)[:128]
    cols = torch.randperm(n, device=dev, generator=gen)[:128]
    ref = x[rows].double() @ y[:, cols].double()
    got = c[rows][:, cols].double()
    rel = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
    torch.backends.cuda.matmul.allow_tf32 = False
    ok = written and math.isfinite(rel) and rel <= ERROR_BOUNDS[name]
    return {
        "tflops": round(2 * n**3 / (ms * 1e-3) / 1e12, 2),
        "median_ms": round(ms, 4),
        "rel_err": rel if math.isfinite(rel) else None,
        "bound": ERROR_BOUNDS[name],
        "ok": ok,
    }


def bandwidth(torch: Any, dev: Any, quick: bool, free: int) -> dict[str, Any]:
    """Device copy (bytes read + written) and pinned host<->device copies, in decimal GB/s."""
    size = min((256 if quick else 1024) * MIB, free // 6)
    src = torch.randn(size // 4, device=dev)
    dst = torch.empty_like(src)
    ms = time_gpu(torch, lambda i: dst.copy_(src), target_ms=20, repeats=5 if quick else 9, warm_ms=20)
    d2d = 2 * size / (ms * 1e-3) / 1e9
    hsize = (64 if quick else 256) * MIB
    host = torch.randn(hsize // 4).pin_memory()
    dbuf = torch.empty(hsize // 4, device=dev)
    reps = 3 if quick else 5
    h2d = time_gpu(
        torch, lambda i: dbuf.copy_(host, non_blocking=True), target_ms=20, repeats=reps, warm_ms=10
    )
    d2h = time_gpu(
        torch, lambda i: host.copy_(dbuf, non_blocking=True), target_ms=20, repeats=reps, warm_ms=10
    )
    return {
        "d2d_gbps": round(d2d, 1),
        "d2d_bytes": size,
        "h2d_pinned_gbps": round(hsize / (h2d * 1e-3) / 1e9, 2),
        "d2h_pinned_gbps": round(hsize / (d2h * 1e-3) / 1e9, 2),
    }


def measure_device(
    torch: Any, index: int, args: argparse.Namespace, clock: Clock, peaks: dict[str, Any], share: float
) -> dict[str, Any]:
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    free, total = torch.cuda.mem_get_info(dev)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 * MIB)
    info: dict[str, Any] = {
        "index": index,
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(total / (1 << 30), 2),
        "sm_count": props.multi_processor_count,
        "l2_mib": round(l2 / MIB, 1),
    }
    peak = peaks.get(props.name.strip().lower()) or {}
    info["peak_known"] = bool(peak)
    n = args.size or choose_size(props, args.quick)
    repeats = args.repeats or (3 if args.quick else 7)
    # several GPUs share one budget: shorter timed loops each (still >> launch overhead)
    target_ms = 15.0 if args.quick or torch.cuda.device_count() > 2 else 40.0
    matmul: dict[str, Any] = {"size": n}
    deadline = time.monotonic() + share
    skipped: list[str] = []
    for name in args.dtype_list:
        if name == "bf16" and not bf16_native(torch):
            skipped.append(f"gpu{index}:bf16:unsupported")
            continue
        if time.monotonic() > deadline or clock.left() < 2:
            skipped.append(f"gpu{index}:{name}:budget")
            continue
        row = matmul_dtype(torch, dev, name, n, l2, repeats, target_ms)
        row["pct_of_peak"] = pct(row["tflops"], peak.get(PEAK_KEYS[name]))
        matmul[name] = row
        check = f"rel_err={row['rel_err']:.2e} {'ok' if row['ok'] else 'FAIL'}"
        say(f"gpu{index} {name:<4} n={n}: {row['tflops']:8.1f} TFLOP/s{of_peak(row['pct_of_peak'])}  {check}")
    info["matmul"] = matmul
    if clock.left() > 2:
        bw = bandwidth(torch, dev, args.quick, free)
        bw["d2d_pct_of_peak"] = pct(bw["d2d_gbps"], peak.get("mem_bw_gbps"))
        info["bandwidth"] = bw
        say(
            f"gpu{index} copy: device {bw['d2d_gbps']:.0f} GB/s (read+write){of_peak(bw['d2d_pct_of_peak'])}"
            f", pinned h2d {bw['h2d_pinned_gbps']:.1f} GB/s, d2h {bw['d2h_pinned_gbps']:.1f} GB/s"
        )
    else:
        skipped.append(f"gpu{index}:bandwidth:budget")
    info["skipped"] = skipped
    torch.cuda.empty_cache()
    return info


# -- multi-GPU all-reduce (one process per GPU, loopback only) ---------------------------------


def _allreduce_worker(rank: int, world: int, port: int, nbytes: int, queue: Any) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")  # one host: keep NCCL's bootstrap on loopback
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=60),
    )
    try:
        x = torch.randn(nbytes // 4, device="cuda")
        # AVG moves the same bytes as SUM but keeps repeated reductions of random data finite
        avg = dist.ReduceOp.AVG
        ms = time_gpu(torch, lambda i: dist.all_reduce(x, op=avg), target_ms=30, repeats=5, warm_ms=30)
        y = torch.full((1024,), float(rank + 1), device="cuda")
        dist.all_reduce(y)
        ok = bool(torch.all(y == world * (world + 1) / 2).item())
        if rank == 0:
            queue.put((ms, ok))
    finally:
        dist.destroy_process_group()


def allreduce(torch: Any, world: int, quick: bool) -> dict[str, Any]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nbytes = (64 if quick else 256) * MIB
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(_allreduce_worker, args=(world, port, nbytes, queue), nprocs=world, join=True)
    ms, ok = queue.get()
    alg = nbytes / (ms * 1e-3) / 1e9  # bus bandwidth: what each GPU's links carry in a ring
    busbw = round(alg * 2 * (world - 1) / world, 2)
    return {
        "world_size": world,
        "bytes": nbytes,
        "median_ms": round(ms, 3),
        "algbw_gbps": round(alg, 2),
        "busbw_gbps": busbw,
        "ok": ok,
    }


# -- the run -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock(args.budget)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "tester_version": TESTER_VERSION,
        "status": "fail",
        "reason": None,
        "mode": "gpu",
        "quick": bool(args.quick),
        "budget_s": args.budget,
        "simulated": False,
    }
    # the image's own toolkit first, before torch loads its bundled runtime
    cudart = probe_cudart()
    peaks = load_peaks(args.peaks)
    try:
        import torch
    except ImportError as exc:
        result.update(reason="no-torch", error=str(exc), env=environment(None))
        return result
    env = environment(torch)
    env["cudart"] = cudart
    cuda_ok = torch.cuda.is_available()
    env["cuda_available"] = cuda_ok
    env["device_count"] = torch.cuda.device_count() if cuda_ok else 0
    result["env"] = env
    say(
        f"acagpu gpu-tester {TESTER_VERSION}: torch {env['torch']} (CUDA {env['torch_cuda']}), "
        f"driver {env['driver']} (CUDA {env['driver_cuda']}), python {env['python']}"
    )
    if cudart["found"]:
        say(
            f"image libcudart {cudart.get('runtime_version')} at {cudart['path']}: "
            f"{cudart.get('device_count')} device(s)"
            + (f", error {cudart['error']}" if cudart.get("error") else "")
        )

    cpu_s = args.cpu_budget or (0.5 if args.quick else min(3.0, args.budget * 0.07))
    cpu = cpu_baseline(torch, cpu_s)
    result["cpu"] = cpu
    say(f"cpu fp32 matmul n={cpu['size']}: {cpu['gflops']:.1f} GFLOP/s ({cpu['threads']} threads)")

    if not cuda_ok:
        result["mode"] = "cpu-only"
        say("CUDA is not available: CPU baseline only.")
        if args.allow_cpu:
            result["status"] = "pass"
        else:
            result["reason"] = "no-cuda"
        return result

    say("CUDA is available. Running on GPU.")
    count = env["device_count"]
    devices: list[dict[str, Any]] = []
    for index in range(count):
        share = max(1.0, (clock.left() - (8 if count > 1 else 2)) / (count - index))
        devices.append(measure_device(torch, index, args, clock, peaks, share))
    result["devices"] = devices
    first = devices[0]
    result["gpu"] = {
        "name": first["name"],
        "count": count,
        "capability": first["capability"],
        "memory_gib": first["memory_gib"],
    }
    matmul = first["matmul"]
    result["tflops"] = {d: matmul[d]["tflops"] for d in DTYPES if d in matmul}
    result["pct_of_peak"] = {d: matmul[d]["pct_of_peak"] for d in DTYPES if d in matmul}
    result["bandwidth_gbps"] = {
        k[:-5]: v for k, v in first.get("bandwidth", {}).items() if k.endswith("_gbps")
    }
    result["matmul_size"] = matmul["size"]
    main = next((d for d in ("fp32", "tf32", "bf16", "fp16") if d in matmul), None)
    if main:
        seconds = matmul[main]["median_ms"] / 1e3
        result["main"] = {"dtype": main, "seconds": seconds}
        say(f"Elapsed Time: {seconds:.6f} seconds")
        result["speedup"] = round(matmul[main]["tflops"] * 1e3 / cpu["gflops"], 1) if cpu["gflops"] else None
    result["correct"] = all(dev["matmul"][d]["ok"] for dev in devices for d in DTYPES if d in dev["matmul"])
    result["skipped"] = [s for dev in devices for s in dev["skipped"]]

    result["allreduce"] = None
    if count > 1 and not args.no_allreduce:
        if clock.left() > 6:
            try:
                ar = allreduce(torch, count, args.quick)
                say(
                    f"nccl all-reduce x{count} {ar['bytes'] // MIB} MiB: bus {ar['busbw_gbps']:.1f} GB/s "
                    f"(alg {ar['algbw_gbps']:.1f} GB/s) {'ok' if ar['ok'] else 'WRONG SUM'}"
                )
            except Exception as exc:  # NCCL or spawn failure: a failed check, reported, not a crash
                ar = {"world_size": count, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
                say(f"nccl all-reduce x{count} failed: {ar['error']}")
            result["allreduce"] = ar
        else:
            result["skipped"].append("allreduce:budget")

    if not main:
        result["reason"] = "budget-exceeded"
    elif not result["correct"]:
        result["reason"] = "incorrect-result"
    elif result["allreduce"] is not None and not result["allreduce"]["ok"]:
        result["reason"] = "allreduce-wrong"
    else:
        result["status"] = "pass"
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        result = run(args)
    except Exception as exc:  # a CUDA error mid-run is a failed check, still reported as one line
        result = {
            "schema": SCHEMA,
            "tester_version": TESTER_VERSION,
            "status": "fail",
            "reason": "error",
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "simulated": False,
        }
    result["elapsed_s"] = round(time.monotonic() - T0, 3)
    say(
        f"status: {result['status']}"
        + (f" ({result['reason']})" if result.get("reason") else "")
        + f" in {result['elapsed_s']:.1f}s"
    )
    say(f"{RESULT_TAG} {json.dumps(result, separators=(',', ':'), sort_keys=True)}")
    return EXIT_PASS if result["status"] == "pass" else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
