"""A gpu-tester run as the emulated fleet would produce it: the real tester's lines and result schema,
numbers from the datasheet (`aca_gpu/gpu/data/gpus.json`) at plausible efficiencies, marked simulated.

The document mirrors `templates/gpu-tester/gpu_tester.py` field for field, so everything downstream
(`aca_gpu.gpu.tester_result`, reports, the job summary) sees the same shape a real GPU prints.
"""

from __future__ import annotations

import json
import random
from typing import Any

from aca_gpu.emulator.workloads.fleet import MODELS
from aca_gpu.emulator.workloads.smi_render import SmiGpu
from aca_gpu.gpu.profiles import GpuSpec, lookup_gpu

RESULT_TAG = "ACAGPU_RESULT"
TESTER_VERSION = "1.0"
SCHEMA = 1
DTYPES = ("fp32", "tf32", "fp16", "bf16")
ERROR_BOUNDS = {"fp32": 1e-4, "tf32": 3e-3, "fp16": 5e-3, "bf16": 1.5e-2}
# Share of the datasheet peak a well-timed dense matmul reaches (reference: cuda-compat.md 3, 60-80 %
# typical), and of the memory bandwidth a device-to-device copy reaches.
EFFICIENCY = {"fp32": 0.80, "tf32": 0.72, "fp16": 0.74, "bf16": 0.76}
COPY_EFFICIENCY = 0.86
TYPICAL_REL_ERR = {"fp32": 2.1e-6, "tf32": 4.6e-4, "fp16": 1.9e-3, "bf16": 7.8e-3}
CPU_GFLOPS_PER_VCPU = 19.0  # AVX-512 EPYC vCPU, fp32 sgemm through torch's MKL/oneDNN


def _peak(spec: GpuSpec | None, dtype: str) -> float | None:
    if spec is None:
        return None
    value = {
        "fp32": spec.fp32_tflops,
        "tf32": spec.tf32_tflops,
        "fp16": spec.fp16_tflops,
        "bf16": spec.bf16_tflops,
    }[dtype]
    return value


def _pct(value: float, peak: float | None) -> float | None:
    return round(100.0 * value / peak, 1) if peak else None


def simulate(
    gpus: tuple[SmiGpu, ...], *, driver: str, driver_cuda: str | None, vcpu: int, host: str
) -> tuple[list[tuple[float, str]], dict[str, Any]]:
    """(script of (realistic seconds before the line, line), the ACAGPU_RESULT document)."""
    rng = random.Random(host)

    def jitter(x: float) -> float:
        return x * rng.uniform(0.97, 1.03)

    torch_cuda = (
        "12.4" if driver_cuda is None or tuple(map(int, driver_cuda.split("."))) >= (12, 4) else "12.1"
    )
    torch_version = f"2.5.1+cu{torch_cuda.replace('.', '')}"
    env: dict[str, Any] = {
        "host": host,
        "python": "3.11.10",
        "torch": torch_version,
        "torch_cuda": torch_cuda,
        "driver": driver,
        "driver_cuda": driver_cuda,
        "cpu_count": vcpu,
        "cudart": {"found": False, "path": None},
        "cuda_available": True,
        "device_count": len(gpus),
    }
    script: list[tuple[float, str]] = [
        (
            4.0,
            f"acagpu gpu-tester {TESTER_VERSION}: torch {torch_version} (CUDA {torch_cuda}), "
            f"driver {driver} (CUDA {driver_cuda}), python {env['python']}",
        ),
    ]
    cpu_n = 2048 if vcpu >= 16 else 1024
    cpu_gflops = round(jitter(CPU_GFLOPS_PER_VCPU * vcpu), 2)
    cpu = {
        "size": cpu_n,
        "median_ms": round(2 * cpu_n**3 / (cpu_gflops * 1e9) * 1e3, 3),
        "gflops": cpu_gflops,
        "threads": vcpu,
    }
    script.append((3.0, f"cpu fp32 matmul n={cpu_n}: {cpu_gflops:.1f} GFLOP/s ({vcpu} threads)"))
    script.append((0.8, "CUDA is available. Running on GPU."))
    devices = [_device(gpu, rng, script) for gpu in gpus]
    first = devices[0]
    matmul = first["matmul"]
    main = next(d for d in ("fp32", "tf32", "bf16", "fp16") if d in matmul)
    seconds = matmul[main]["median_ms"] / 1e3
    script.append((0.1, f"Elapsed Time: {seconds:.6f} seconds"))
    allreduce = None
    if len(gpus) > 1:
        nbytes = 256 << 20
        busbw = round(jitter(20.5), 2)  # NC A100 v4: PCIe Gen4 peer traffic, no NVLink
        world = len(gpus)
        algbw = round(busbw * world / (2 * (world - 1)), 2)
        allreduce = {
            "world_size": world,
            "bytes": nbytes,
            "median_ms": round(nbytes / (algbw * 1e9) * 1e3, 3),
            "algbw_gbps": algbw,
            "busbw_gbps": busbw,
            "ok": True,
        }
        script.append(
            (6.0, f"nccl all-reduce x{world} 256 MiB: bus {busbw:.1f} GB/s (alg {algbw:.1f} GB/s) ok")
        )
    elapsed = round(sum(delay for delay, _ in script) + 0.4, 3)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "tester_version": TESTER_VERSION,
        "status": "pass",
        "reason": None,
        "mode": "gpu",
        "quick": False,
        "budget_s": 45.0,
        "simulated": True,
        "env": env,
        "cpu": cpu,
        "devices": devices,
        "gpu": {
            "name": first["name"],
            "count": len(gpus),
            "capability": first["capability"],
            "memory_gib": first["memory_gib"],
        },
        "tflops": {d: matmul[d]["tflops"] for d in DTYPES if d in matmul},
        "pct_of_peak": {d: matmul[d]["pct_of_peak"] for d in DTYPES if d in matmul},
        "bandwidth_gbps": {k[:-5]: v for k, v in first["bandwidth"].items() if k.endswith("_gbps")},
        "matmul_size": matmul["size"],
        "main": {"dtype": main, "seconds": seconds},
        "speedup": round(matmul[main]["tflops"] * 1e3 / cpu_gflops, 1),
        "correct": True,
        "skipped": [s for dev in devices for s in dev["skipped"]],
        "allreduce": allreduce,
        "elapsed_s": elapsed,
    }
    script.append((0.0, f"status: pass in {elapsed:.1f}s"))
    script.append((0.0, f"{RESULT_TAG} {json.dumps(doc, separators=(',', ':'), sort_keys=True)}"))
    return script, doc


def _device(gpu: SmiGpu, rng: random.Random, script: list[tuple[float, str]]) -> dict[str, Any]:
    model = MODELS.get(gpu.name)
    spec = lookup_gpu(gpu.name)
    sm_count = model.sm_count if model else 80
    l2_mib = model.l2_mib if model else 40.0
    memory_gib = round(gpu.memory_total_mib / 1024, 2)
    n = 8192 if sm_count >= 80 and memory_gib >= 30 else 4096
    i = gpu.index
    matmul: dict[str, Any] = {"size": n}
    skipped: list[str] = []
    for dtype in DTYPES:
        peak = _peak(spec, dtype)
        if dtype == "bf16" and peak is None:
            skipped.append(f"gpu{i}:bf16:unsupported")
            continue
        tflops = round((peak or 10.0) * EFFICIENCY[dtype] * rng.uniform(0.97, 1.03), 2)
        rel_err = TYPICAL_REL_ERR[dtype] * rng.uniform(0.8, 1.2)
        row = {
            "tflops": tflops,
            "median_ms": round(2 * n**3 / (tflops * 1e12) * 1e3, 4),
            "rel_err": rel_err,
            "bound": ERROR_BOUNDS[dtype],
            "ok": True,
            "pct_of_peak": _pct(tflops, peak),
        }
        matmul[dtype] = row
        pct_text = f" ({row['pct_of_peak']}% of peak)" if row["pct_of_peak"] is not None else ""
        script.append(
            (2.5, f"gpu{i} {dtype:<4} n={n}: {tflops:8.1f} TFLOP/s{pct_text}  rel_err={rel_err:.2e} ok")
        )
    mem_bw = spec.mem_bw_gbps if spec else 500.0
    d2d = round(mem_bw * COPY_EFFICIENCY * rng.uniform(0.98, 1.02), 1)
    h2d_peak = model.pcie_h2d_gbps if model else 12.0
    bandwidth = {
        "d2d_gbps": d2d,
        "d2d_bytes": 1024 << 20,
        "h2d_pinned_gbps": round(h2d_peak * rng.uniform(0.97, 1.0), 2),
        "d2h_pinned_gbps": round(h2d_peak * rng.uniform(1.0, 1.05), 2),
        "d2d_pct_of_peak": _pct(d2d, spec.mem_bw_gbps if spec else None),
    }
    bw_pct = f" ({bandwidth['d2d_pct_of_peak']}% of peak)" if bandwidth["d2d_pct_of_peak"] is not None else ""
    script.append(
        (
            2.0,
            f"gpu{i} copy: device {d2d:.0f} GB/s (read+write){bw_pct}, pinned h2d "
            f"{bandwidth['h2d_pinned_gbps']:.1f} GB/s, d2h {bandwidth['d2h_pinned_gbps']:.1f} GB/s",
        )
    )
    return {
        "index": i,
        "name": gpu.name,
        "capability": gpu.compute_cap,
        "memory_gib": memory_gib,
        "sm_count": sm_count,
        "l2_mib": l2_mib,
        "peak_known": spec is not None,
        "matmul": matmul,
        "bandwidth": bandwidth,
        "skipped": skipped,
    }


def simulate_cpu_only(*, vcpu: int, host: str) -> tuple[list[tuple[float, str]], dict[str, Any]]:
    """The tester on a replica without a GPU: CPU baseline, then a `no-cuda` failure (exit code 1)."""
    rng = random.Random(host)
    cpu_n = 1024
    gflops = round(CPU_GFLOPS_PER_VCPU * vcpu * rng.uniform(0.97, 1.03), 2)
    env = {
        "host": host,
        "python": "3.11.10",
        "torch": "2.5.1+cu124",
        "torch_cuda": "12.4",
        "driver": None,
        "driver_cuda": None,
        "cpu_count": vcpu,
        "cudart": {"found": False, "path": None},
        "cuda_available": False,
        "device_count": 0,
    }
    script: list[tuple[float, str]] = [
        (
            4.0,
            "acagpu gpu-tester 1.0: torch 2.5.1+cu124 (CUDA 12.4), driver None (CUDA None), python 3.11.10",
        ),
        (3.0, f"cpu fp32 matmul n={cpu_n}: {gflops:.1f} GFLOP/s ({vcpu} threads)"),
        (0.1, "CUDA is not available: CPU baseline only."),
    ]
    elapsed = round(sum(delay for delay, _ in script) + 0.3, 3)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "tester_version": TESTER_VERSION,
        "status": "fail",
        "reason": "no-cuda",
        "mode": "cpu-only",
        "quick": False,
        "budget_s": 45.0,
        "simulated": True,
        "env": env,
        "cpu": {
            "size": cpu_n,
            "median_ms": round(2 * cpu_n**3 / (gflops * 1e9) * 1e3, 3),
            "gflops": gflops,
            "threads": vcpu,
        },
        "elapsed_s": elapsed,
    }
    script.append((0.0, f"status: fail (no-cuda) in {elapsed:.1f}s"))
    script.append((0.0, f"{RESULT_TAG} {json.dumps(doc, separators=(',', ':'), sort_keys=True)}"))
    return script, doc
