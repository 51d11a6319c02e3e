"""A gpu-tester run as the emulated fleet would produce it: the real tester's lines and result schema,
numbers from the datasheet (`aca_gpu/gpu/data/gpus.json`) at plausible efficiencies, marked simulated.

It speaks as the current tester (1.3): the headline rate (bf16, else fp16) measured first with a
longer warm-up on the cold card, the later rates in shorter settled windows, each rate's line saying
its window and warm-up, `phases` (where the seconds went), `warnings` and `skipped`.

The document mirrors `templates/gpu-tester/gpu_tester.py` field for field, so everything downstream
(`aca_gpu.gpu.tester_result`, reports, the job summary) sees the same shape a real GPU prints. Its
telemetry is made up from each model's NVML limits (max clocks, power cap) the way the real parts
behave under a dense GEMM (tensor work pulls the SM clock under the power cap on T4 and A100 PCIe),
and says so: `telemetry.source` is "simulated". The tester's result grace period
(`ACAGPU_RESULT_GRACE_S`) is returned for the caller to play on the emulator's scaled clock.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

from aca_gpu.emulator.workloads.fleet import MODELS
from aca_gpu.emulator.workloads.smi_render import SmiGpu
from aca_gpu.gpu.profiles import GpuSpec, lookup_gpu

RESULT_TAG = "ACAGPU_RESULT"
TESTER_VERSION = "1.3"  # templates/gpu-tester/gpu_tester.py
SCHEMA = 3
GRACE_ENV, DEFAULT_GRACE_S = "ACAGPU_RESULT_GRACE_S", 15.0
TELEMETRY_MS = 20
SLOWDOWN_TEMP_C = 90
DTYPES = ("fp32", "tf32", "fp16", "bf16")
RATE_ORDER = ("bf16", "fp16", "tf32", "fp32")  # the tester's: the headline first
ERROR_BOUNDS = {"fp32": 1e-4, "tf32": 3e-3, "fp16": 5e-3, "bf16": 1.5e-2}
# Share of the datasheet peak a well-timed dense matmul reaches (60-80 %
# typical against NVIDIA's datasheet rates), and of the memory bandwidth a device-to-device copy reaches.
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


def nvml_health(gpu: SmiGpu) -> dict[str, Any]:
    """What the real tester reads through NVML about health (tester 1.2), from the simulated GPU."""
    remaps = gpu.architecture in ("Ampere", "Hopper", "Ada Lovelace", "Blackwell")
    return {
        "ecc_volatile_corrected": gpu.ecc_volatile_corrected,
        "ecc_volatile_uncorrected": gpu.ecc_volatile_uncorrected,
        "ecc_aggregate_corrected": gpu.ecc_volatile_corrected,
        "ecc_aggregate_uncorrected": gpu.ecc_volatile_uncorrected,
        "remapped_correctable": 0 if remaps else None,
        "remapped_uncorrectable": gpu.remapped_uncorrectable if remaps else None,
        "remap_pending": gpu.remap_pending if remaps else None,
        "remap_failure": gpu.remap_failure if remaps else None,
        "retired_pages_pending": None if remaps else gpu.pages_pending,
        "pcie_gen": gpu.pcie_gen,
        "pcie_gen_max": gpu.pcie_gen_max,
        "pcie_width": gpu.pcie_width,
        "pcie_width_max": gpu.pcie_width_max,
    }


def _pct(value: float, peak: float | None) -> float | None:
    return round(100.0 * value / peak, 1) if peak else None


def result_grace_s(env: Mapping[str, str]) -> float:
    """The tester's own reading of ACAGPU_RESULT_GRACE_S: unset or not a number is 15 s, 0 is none."""
    text = env.get(GRACE_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_GRACE_S
    except ValueError:
        return DEFAULT_GRACE_S
    return min(max(value, 0.0), 3600.0) if math.isfinite(value) else DEFAULT_GRACE_S


def _status_line(status: str, reason: str | None, elapsed: float, grace: float) -> str:
    return (
        f"status: {status}"
        + (f" ({reason})" if reason else "")
        + f" in {elapsed:.1f}s"
        + (f"; staying {grace:g}s so this log can still be read" if grace else "")
    )


def _sample(
    rng: random.Random, *, sm: int, mem: int, watts: float, temp: int, capped: float
) -> dict[str, Any]:
    """One measurement's telemetry summary, in the shape the tester's NVML sampler writes."""
    return {
        "samples": rng.randint(10, 16),
        "sm_clock_mhz": sm,
        "sm_clock_min_mhz": sm - rng.choice((0, 15, 30, 45)),
        "mem_clock_mhz": mem,
        "power_w": round(watts, 1),
        "temp_c": temp,
        "temp_max_c": temp + rng.randint(0, 3),
        "util_pct": rng.randint(98, 100),
        "reasons": {"sw-power-cap": round(capped, 2)} if capped else {},
    }


def simulate(
    gpus: tuple[SmiGpu, ...],
    *,
    driver: str,
    driver_cuda: str | None,
    vcpu: int,
    host: str,
    result_grace_s: float = DEFAULT_GRACE_S,
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
        "cuda_init": {"driver_lib": True, "attempts": 1, "errors": [], "ok": True},
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
    phases: dict[str, Any] = {"cuda_init": round(jitter(1.1), 2), "import_torch": round(jitter(2.9), 2)}
    cpu_n = 2048 if vcpu >= 16 else 1024
    cpu_gflops = round(jitter(CPU_GFLOPS_PER_VCPU * vcpu), 2)
    cpu = {
        "size": cpu_n,
        "median_ms": round(2 * cpu_n**3 / (cpu_gflops * 1e9) * 1e3, 3),
        "gflops": cpu_gflops,
        "threads": vcpu,
    }
    script.append((0.5, f"cpu fp32 matmul n={cpu_n}: {cpu_gflops:.1f} GFLOP/s ({vcpu} threads)"))
    phases["cpu"] = round(jitter(0.5), 2)
    script.append((0.8, "CUDA is available. Running on GPU."))
    script.append((0.1, f"telemetry: simulated, as NVML every {TELEMETRY_MS} ms during each timed loop"))
    devices = [_device(gpu, rng, script) for gpu in gpus]
    for dev in devices:
        phases[f"gpu{dev['index']}"] = {"total": round(sum(dev["phases"].values()), 2), **dev["phases"]}
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
        phases["allreduce"] = round(jitter(6.0), 2)
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
        "warnings": [],
        "phases": phases,
        "env": env,
        "telemetry": {"available": True, "source": "simulated", "interval_ms": TELEMETRY_MS, "reason": None},
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
        "result_grace_s": result_grace_s,
    }
    script.append((0.0, _status_line("pass", None, elapsed, result_grace_s)))
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
    max_sm = model.clock_max_sm_mhz if model else 1410
    max_mem = model.clock_max_mem_mhz if model else 1512
    limit = float(model.power_limit_w if model else 300)
    # under tensor-core work these parts run into their power cap on some hosts and not on others
    capped = rng.random() < 0.5
    temp = rng.randint(52, 68)
    measured: list[tuple[str, dict[str, Any]]] = []
    phases: dict[str, float] = {"context": round(rng.uniform(0.3, 0.6), 2)}
    for dtype in RATE_ORDER:
        peak = _peak(spec, dtype)
        if dtype == "bf16" and peak is None:
            skipped.append(f"gpu{i}:bf16:unsupported")
            script.append((0.0, f"gpu{i} bf16: skipped, this GPU has no native bf16"))
            continue
        first = len(matmul) == 1  # the headline, on a card still cold: three agreeing 1 s periods
        tflops = round((peak or 10.0) * EFFICIENCY[dtype] * rng.uniform(0.97, 1.03), 2)
        rel_err = TYPICAL_REL_ERR[dtype] * rng.uniform(0.8, 1.2)
        tensor = dtype != "fp32" and capped
        sm = round(max_sm * (rng.uniform(0.88, 0.95) if tensor else 1.0) / 15) * 15
        telemetry = _sample(
            rng,
            sm=sm,
            mem=max_mem,
            watts=limit * (rng.uniform(0.97, 1.02) if tensor else rng.uniform(0.7, 0.9)),
            temp=temp + (4 if tensor else 0),
            capped=rng.uniform(0.6, 1.0) if tensor else 0.0,
        )
        window = 2.0 if first else 1.0
        warmup = round(rng.uniform(3.0, 4.5) if first else rng.uniform(1.0, 1.2), 2)
        calls = max(1, round(window * tflops * 1e12 / (2 * n**3) / 8))
        row: dict[str, Any] = {
            "tflops": tflops,
            "median_ms": round(2 * n**3 / (tflops * 1e12) * 1e3, 4),
            "burst_tflops": round(tflops * rng.uniform(1.08, 1.15), 2),
            "window_s": window,
            "window_spread_pct": round(rng.uniform(0.05, 0.4), 2),
            "warmup_s": warmup,
            "settled": True,
            "chunks": 8,
            "chunk_calls": calls,
            "rel_err": rel_err,
            "bound": ERROR_BOUNDS[dtype],
            "ok": True,
            "pct_of_peak": _pct(tflops, peak),
            "telemetry": telemetry,
        }
        if peak:
            at_clock_tflops = round(peak * sm / max_sm, 1)
            row["at_clock_tflops"] = at_clock_tflops
            row["pct_of_clock"] = _pct(tflops, at_clock_tflops)
        matmul[dtype] = row
        phases[dtype] = round(warmup + window + 0.4, 2)
        measured.append((dtype, telemetry))
        pct_text = f" ({row['pct_of_peak']}% of peak)" if row["pct_of_peak"] is not None else ""
        at_clock = (
            f", {row['pct_of_clock']}% of {row['at_clock_tflops']} at that clock"
            if "pct_of_clock" in row
            else ""
        )
        tel_text = f"  [SM {sm} MHz, {telemetry['power_w']:.0f} W, {telemetry['temp_c']} °C{at_clock}]"
        check = f"rel_err={rel_err:.2e} ok"
        script.append(
            (
                phases[dtype],
                f"gpu{i} {dtype:<4} n={n}: {tflops:8.1f} TFLOP/s{pct_text} sustained over {window:.1f}s "
                f"after {warmup:.1f}s warm-up, burst {row['burst_tflops']:.1f}  {check}{tel_text}",
            )
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
        "telemetry": _sample(rng, sm=max_sm, mem=max_mem, watts=limit * 0.6, temp=temp + 2, capped=0.0),
    }
    phases["copy"] = round(rng.uniform(0.8, 1.1), 2)
    bw_pct = f" ({bandwidth['d2d_pct_of_peak']}% of peak)" if bandwidth["d2d_pct_of_peak"] is not None else ""
    script.append(
        (
            phases["copy"],
            f"gpu{i} copy: device {d2d:.0f} GB/s (read+write){bw_pct}, pinned h2d "
            f"{bandwidth['h2d_pinned_gbps']:.1f} GB/s, d2h {bandwidth['d2h_pinned_gbps']:.1f} GB/s",
        )
    )
    evidence = []
    if capped:
        share, label, tel = max(
            ((t["reasons"].get("sw-power-cap", 0.0), lbl, t) for lbl, t in measured), key=lambda x: x[0]
        )
        evidence.append(
            f"sw-power-cap in {share:.0%} of {label} samples, {tel['power_w']} of {limit} W, "
            f"SM {tel['sm_clock_mhz']} of {max_sm} MHz"
        )
    verdict = "power-capped" if capped else "nominal"
    script.append((0.0, f"gpu{i} clocks: {verdict} (SM max {max_sm} MHz, power limit {limit} W)"))
    script += [(0.0, f"gpu{i}   {line}") for line in evidence]
    telemetry_record = {
        "available": True,
        "power_source": "simulated",
        "sm_clock_max_mhz": max_sm,
        "mem_clock_max_mhz": max_mem,
        "app_sm_clock_mhz": max_sm,
        "power_limit_w": limit,
        "power_default_limit_w": limit,
        "slowdown_temp_c": SLOWDOWN_TEMP_C,
        "clock_ref_mhz": max_sm,
        "clock_ref_source": "nvml-max",
        "verdict": verdict,
        "evidence": evidence,
        "findings": [],
        "health": nvml_health(gpu),
    }
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
        "telemetry": telemetry_record,
        "skipped": skipped,
        "phases": phases,
    }


def simulate_cpu_only(
    *, vcpu: int, host: str, result_grace_s: float = DEFAULT_GRACE_S
) -> tuple[list[tuple[float, str]], dict[str, Any]]:
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
        "cuda_init": {"driver_lib": False, "attempts": 0, "errors": [], "ok": False},
        "cuda_available": False,
        "device_count": 0,
    }
    script: list[tuple[float, str]] = [
        (
            4.0,
            f"acagpu gpu-tester {TESTER_VERSION}: torch 2.5.1+cu124 (CUDA 12.4), driver None (CUDA None), "
            "python 3.11.10",
        ),
        (0.5, f"cpu fp32 matmul n={cpu_n}: {gflops:.1f} GFLOP/s ({vcpu} threads)"),
        (0.1, "CUDA is not available: CPU baseline only."),
        (0.0, "telemetry: unavailable (no CUDA device)"),
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
        "warnings": [],
        "phases": {"cuda_init": 1.1, "import_torch": 2.9, "cpu": 0.5},
        "env": env,
        "telemetry": {"available": False, "source": None, "interval_ms": None, "reason": "no CUDA device"},
        "cpu": {
            "size": cpu_n,
            "median_ms": round(2 * cpu_n**3 / (gflops * 1e9) * 1e3, 3),
            "gflops": gflops,
            "threads": vcpu,
        },
        "elapsed_s": elapsed,
        "result_grace_s": result_grace_s,
    }
    script.append((0.0, _status_line("fail", "no-cuda", elapsed, result_grace_s)))
    script.append((0.0, f"{RESULT_TAG} {json.dumps(doc, separators=(',', ':'), sort_keys=True)}"))
    return script, doc
