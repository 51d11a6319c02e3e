#!/usr/bin/env python3
"""acagpu gpu-tester: a short, honest GPU check that prints one machine-readable result line.

Standalone on purpose (stdlib + torch only, never acagpu): the same file runs under
`docker run --gpus all`, `apptainer exec --nv`, as an Azure Container Apps job, injected into a
public PyTorch image through an environment variable, and directly on a GPU host.

Every matmul rate is taken at steady state: warm-up until the rate, the SM clock and the power stop
moving from one second to the next, then a timed window of at least a second (four for fp16/bf16,
two for fp32/tf32) in CUDA-event-timed chunks; the window's total work over its time is the rate,
the best chunk the burst, reported apart. Inputs are random (never zeros) and rotated so their total
exceeds the L2 cache. `--burn SECONDS` then keeps every GPU at full load, checking results against
a reference. While each rate is taken, a background thread samples the GPU through
the driver's own NVML library (ctypes, no extra package), so every rate comes with the clocks, power
and temperature it was measured at. The README beside this file documents the output schema.
Exit codes: 0 pass, 1 fail, 2 bad arguments.
"""

from __future__ import annotations  # annotations stay strings: runs on Python 3.8+ images

import argparse
import contextlib
import ctypes
import ctypes.util
import glob
import json
import math
import os
import platform
import signal
import socket
import statistics
import sys
import threading
import time
from typing import Any

TESTER_VERSION = "1.3"
# 2 adds telemetry, per-rate clock context, env.cuda_init and result_grace_s; 3 steady-state rates
# (tflops over a timed window after warm-up; burst_tflops, window_s, warmup_s, settled) and burn
SCHEMA = 3
RESULT_TAG = "ACAGPU_RESULT"
DTYPES = ("fp32", "tf32", "fp16", "bf16")
# ‖out − ref‖ / ‖ref‖ against a float64 product of the same (rounded) inputs. fp32 lands far below
# its bound; tf32 rounds operands to 10 mantissa bits; fp16/bf16 also round the output.
ERROR_BOUNDS = {"fp32": 1e-4, "tf32": 3e-3, "fp16": 5e-3, "bf16": 1.5e-2}
HEADLINE_DTYPES = ("fp16", "bf16")  # the rates users quote: the longest windows
PEAK_KEYS = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "fp16": "fp16_tflops", "bf16": "bf16_tflops"}
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MIB = 1 << 20
# ACA removes a finished job replica and its log soon after exit: stay alive this long after the result
GRACE_ENV, DEFAULT_GRACE_S = "ACAGPU_RESULT_GRACE_S", 15.0
# CUDA start-up: some clouds' GPUs fail cuInit now and then; a fresh process usually succeeds
INIT_ENV = "ACAGPU_CUDA_INIT_STATE"  # carried across the re-exec: earlier attempts and the start time
INIT_ATTEMPTS = 3
INIT_DELAYS_S = (1.0, 2.0)
# cuInit answers that another attempt cannot change: no device, driver too old, a stub or mismatched libcuda
CUDA_DEFINITE = {
    100: "CUDA_ERROR_NO_DEVICE",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    34: "CUDA_ERROR_STUB_LIBRARY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
}
NVML_LIB = "libnvidia-ml.so.1"
DEFAULT_TELEMETRY_MS = 20
POWER_INSTANT_FIELD = 186  # NVML_FI_DEV_POWER_INSTANT: nvmlDeviceGetPowerUsage is a 1 s average on Hopper
# NVML clock event ("throttle") reason bits, as nvml.h defines them
REASON_BITS = (
    (0x1, "idle"),
    (0x2, "app-clocks"),
    (0x4, "sw-power-cap"),
    (0x8, "hw-slowdown"),
    (0x10, "sync-boost"),
    (0x20, "sw-thermal"),
    (0x40, "hw-thermal"),
    (0x80, "hw-power-brake"),
    (0x100, "display-clocks"),
)
REASON_SHARE = 0.2  # a reason counts for the verdict when active in at least this share of samples
MIN_WINDOW_SAMPLES = 5  # telemetry samples in every settle period and timed window, at the least
FAR_BELOW_CLOCK = 50.0  # % of the clock-allowed rate under which a rate is a finding in itself


def _start_time() -> float:
    """Monotonic start of the run, kept across a CUDA-init re-exec so elapsed_s covers every attempt."""
    try:
        started = float(json.loads(os.environ.get(INIT_ENV, "{}")).get("wall", 0))
    except (ValueError, AttributeError, TypeError):
        started = 0.0
    now = time.monotonic()
    earlier = time.time() - started
    return now - earlier if started and 0 <= earlier < 3600 else now


T0 = _start_time()


def say(line: str) -> None:
    print(line, flush=True)


# -- arguments ---------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="gpu_tester.py",
        description="Measure a GPU honestly: matmul TFLOP/s per dtype, memory bandwidth, CPU baseline.",
    )
    p.add_argument("--budget", type=float, default=45.0, help="wall-clock bound for the whole run, s")
    p.add_argument(
        "--quick", action="store_true", help="smallest useful run (shorter windows, smaller sizes)"
    )
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is not a failure (CPU part only)")
    p.add_argument("--peaks", metavar="FILE", help="datasheet peaks JSON (default: $ACAGPU_PEAKS text)")
    p.add_argument("--size", type=int, default=0, help="GPU matmul size n (n×n×n); 0 = chosen per GPU")
    p.add_argument(
        "--window",
        type=float,
        default=0.0,
        help="timed window per rate after warm-up, s (>= 1); 0 = automatic",
    )
    p.add_argument(
        "--burn",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the measurements, keep every GPU at full load this long, checking results",
    )
    p.add_argument("--dtypes", default=",".join(DTYPES), help="comma list from fp32,tf32,fp16,bf16")
    p.add_argument("--no-allreduce", action="store_true", help="skip the multi-GPU NCCL all-reduce")
    p.add_argument("--cpu-budget", type=float, default=0.0, help="seconds for the CPU baseline; 0 = auto")
    p.add_argument(
        "--telemetry-ms",
        type=int,
        default=DEFAULT_TELEMETRY_MS,
        help="NVML sampling interval during each timed loop, ms (shortened so every window and settle "
        f"period holds at least {MIN_WINDOW_SAMPLES} samples); 0 = no sampling",
    )
    args = p.parse_args(argv)
    bad = [d for d in args.dtypes.split(",") if d not in DTYPES]
    if bad:
        p.error(f"unknown dtype(s): {','.join(bad)} (choose from {','.join(DTYPES)})")
    if not 1.0 <= args.budget <= 86400:
        p.error("--budget must be between 1 and 86400 seconds")
    if args.size and not 256 <= args.size <= 65536:
        p.error("--size must be between 256 and 65536")
    if args.window and not 1.0 <= args.window <= 600:
        p.error("--window must be 0 (automatic) or between 1 and 600 seconds")
    if args.burn and not 1.0 <= args.burn <= 86400:
        p.error("--burn must be between 1 and 86400 seconds")
    if args.cpu_budget < 0:
        p.error("--cpu-budget must not be negative")
    if args.telemetry_ms and not 5 <= args.telemetry_ms <= 5000:
        p.error("--telemetry-ms must be 0 (off) or between 5 and 5000")
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


# -- CUDA start-up -----------------------------------------------------------------------------


def _init_state() -> dict[str, Any]:
    try:
        state = json.loads(os.environ.get(INIT_ENV, "{}"))
    except ValueError:
        state = {}
    return state if isinstance(state, dict) else {}


def cuda_init_step(lib: Any, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One cuInit attempt: ("ok" | "final" | "retry", the cuda_init record so far).

    A failed cuInit stays failed inside the process that saw it, so a retry is a fresh process: the
    caller re-executes the tester. "final" is an answer no retry changes (no device, old driver).
    """
    attempt = int(state.get("attempt", 0)) + 1
    errors = [str(e) for e in state.get("errors", [])][:INIT_ATTEMPTS]
    record: dict[str, Any] = {"driver_lib": True, "attempts": attempt, "errors": errors, "ok": False}
    rc = int(lib.cuInit(0))
    if rc == 0:
        record["ok"] = True
        return "ok", record
    name = CUDA_DEFINITE.get(rc)
    if name is None:
        text = ctypes.c_char_p()
        try:
            got = lib.cuGetErrorName(rc, ctypes.byref(text)) == 0 and text.value
        except AttributeError:
            got = False
        name = text.value.decode() if got and text.value else f"CUresult {rc}"
    record["errors"] = [*errors, name]
    if rc in CUDA_DEFINITE or attempt >= INIT_ATTEMPTS:
        return "final", record
    return "retry", record


def cuda_init(reexec: bool) -> dict[str, Any]:
    """cuInit through the driver before anything else touches CUDA; retried in a fresh process."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {"driver_lib": False, "attempts": 0, "errors": [], "ok": False}
    state = _init_state()
    outcome, record = cuda_init_step(lib, state)
    if outcome == "retry" and reexec:
        delay = INIT_DELAYS_S[min(record["attempts"], len(INIT_DELAYS_S)) - 1]
        say(
            f"cuInit failed with {record['errors'][-1]} (attempt {record['attempts']} of {INIT_ATTEMPTS}); "
            f"retrying in a fresh process in {delay:g}s"
        )
        time.sleep(delay)
        wall = state.get("wall") or time.time() - (time.monotonic() - T0)
        os.environ[INIT_ENV] = json.dumps(
            {"attempt": record["attempts"], "errors": record["errors"], "wall": wall}
        )
        os.execv(sys.executable, [sys.executable, *sys.argv])
    os.environ.pop(INIT_ENV, None)  # not inherited by the all-reduce workers
    if record["attempts"] > 1 and record["ok"]:
        say(f"CUDA initialised on attempt {record['attempts']} (earlier: {', '.join(record['errors'])})")
    return record


# -- telemetry (NVML through ctypes) -----------------------------------------------------------


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _Value(ctypes.Union):
    _fields_ = [
        ("d", ctypes.c_double),
        ("ui", ctypes.c_uint),
        ("ul", ctypes.c_ulong),
        ("ull", ctypes.c_ulonglong),
        ("sll", ctypes.c_longlong),
        ("si", ctypes.c_int),
    ]


class _FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [
        ("fieldId", ctypes.c_uint),
        ("scopeId", ctypes.c_uint),
        ("timestamp", ctypes.c_longlong),
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", _Value),
    ]


_VALUE_MEMBERS = {0: "d", 1: "ui", 2: "ul", 3: "ull", 4: "sll", 5: "si"}


class Nvml:
    """The driver's NVML, loaded with ctypes: what nvidia-smi reads, without a process per sample."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.reasons_fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        self.instant_power = getattr(lib, "nvmlDeviceGetFieldValues", None) is not None

    @classmethod
    def open(cls) -> tuple[Nvml | None, str | None]:
        try:
            lib = ctypes.CDLL(NVML_LIB)
        except OSError:
            return None, f"{NVML_LIB} is not in this image (the driver's NVML is not mounted)"
        init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
        rc = init() if init else -1
        if rc != 0:
            return None, f"nvmlInit failed (NVML return code {rc})"
        return cls(lib), None

    def close(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            self.lib.nvmlShutdown()

    def handle(self, props: Any, index: int) -> ctypes.c_void_p | None:
        """The NVML device that is torch's device `index`: by UUID, else by PCI address, else by index."""
        handle = ctypes.c_void_p()
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            text = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
            if self.lib.nvmlDeviceGetHandleByUUID(text.encode(), ctypes.byref(handle)) == 0:
                return handle
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            address = f"{domain:08x}:{bus:02x}:{device:02x}.0"
            fn = getattr(self.lib, "nvmlDeviceGetHandleByPciBusId_v2", None)
            if fn is not None and fn(address.encode(), ctypes.byref(handle)) == 0:
                return handle
        if (
            not os.environ.get("CUDA_VISIBLE_DEVICES")
            and self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) == 0
        ):
            return handle
        return None

    def _uint(self, name: str, handle: Any, *args: int) -> int | None:
        fn = getattr(self.lib, name, None)
        if fn is None:
            return None
        value = ctypes.c_uint(0)
        try:
            rc = fn(handle, *[ctypes.c_int(a) for a in args], ctypes.byref(value))
        except OSError:
            return None
        return int(value.value) if rc == 0 else None

    def _ull(self, name: str, handle: Any, *args: int) -> int | None:
        fn = getattr(self.lib, name, None)
        if fn is None:
            return None
        value = ctypes.c_ulonglong(0)
        try:
            rc = fn(handle, *[ctypes.c_int(a) for a in args], ctypes.byref(value))
        except OSError:
            return None
        return int(value.value) if rc == 0 else None

    def health(self, handle: Any) -> dict[str, Any]:
        """What `nvidia-smi -q` prints about health, read through NVML (None where the part has none):
        ECC counts (volatile/aggregate, corrected/uncorrected), row remapping, pages pending
        retirement, PCIe link against its maximum. acagpu judges these like a saved `-q`."""
        out: dict[str, Any] = {}
        for key, err, counter in (
            ("ecc_volatile_corrected", 0, 0),
            ("ecc_volatile_uncorrected", 1, 0),
            ("ecc_aggregate_corrected", 0, 1),
            ("ecc_aggregate_uncorrected", 1, 1),
        ):
            out[key] = self._ull("nvmlDeviceGetTotalEccErrors", handle, err, counter)
        rows = [ctypes.c_uint(0) for _ in range(4)]
        fn = getattr(self.lib, "nvmlDeviceGetRemappedRows", None)
        ok = fn is not None and fn(handle, *[ctypes.byref(r) for r in rows]) == 0
        out.update(
            remapped_correctable=rows[0].value if ok else None,
            remapped_uncorrectable=rows[1].value if ok else None,
            remap_pending=bool(rows[2].value) if ok else None,
            remap_failure=bool(rows[3].value) if ok else None,
        )
        pending = self._uint("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        out["retired_pages_pending"] = bool(pending) if pending is not None else None
        out["pcie_gen"] = self._uint("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        out["pcie_gen_max"] = self._uint("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        out["pcie_width"] = self._uint("nvmlDeviceGetCurrPcieLinkWidth", handle)
        out["pcie_width_max"] = self._uint("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return out

    def static(self, handle: Any) -> dict[str, Any]:
        """What the part allows: max and application SM clocks, power limit, the slowdown temperature."""
        limit = self._uint("nvmlDeviceGetEnforcedPowerLimit", handle)
        default = self._uint("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        self.power_mw(handle)  # settles whether the instant field is there
        return {
            "power_source": "instant" if self.instant_power else "1s-average",
            "sm_clock_max_mhz": self._uint("nvmlDeviceGetMaxClockInfo", handle, 1),
            "mem_clock_max_mhz": self._uint("nvmlDeviceGetMaxClockInfo", handle, 2),
            "app_sm_clock_mhz": self._uint("nvmlDeviceGetApplicationsClock", handle, 1),
            "power_limit_w": round(limit / 1000, 1) if limit else None,
            "power_default_limit_w": round(default / 1000, 1) if default else None,
            "slowdown_temp_c": self._uint("nvmlDeviceGetTemperatureThreshold", handle, 1),
        }

    def power_mw(self, handle: Any) -> int | None:
        """Power now (the instant field); the 1 s average where the driver has no such field."""
        if self.instant_power:
            field = _FieldValue(fieldId=POWER_INSTANT_FIELD)
            member = None
            if (
                self.lib.nvmlDeviceGetFieldValues(handle, 1, ctypes.byref(field)) == 0
                and field.nvmlReturn == 0
            ):
                member = _VALUE_MEMBERS.get(field.valueType)
            if member is not None:
                return int(getattr(field.value, member))
            self.instant_power = False
        return self._uint("nvmlDeviceGetPowerUsage", handle)

    def sample(self, handle: Any) -> tuple[Any, ...]:
        """(SM MHz, memory MHz, power W, °C, GPU busy %, reason bits); None where NVML declines."""
        power = self.power_mw(handle)
        util = _Utilization()
        busy = util.gpu if self.lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0 else None
        reasons = ctypes.c_ulonglong(0)
        bits = None
        if self.reasons_fn is not None and self.reasons_fn(handle, ctypes.byref(reasons)) == 0:
            bits = int(reasons.value)
        return (
            self._uint("nvmlDeviceGetClockInfo", handle, 1),
            self._uint("nvmlDeviceGetClockInfo", handle, 2),
            power / 1000 if power is not None else None,
            self._uint("nvmlDeviceGetTemperature", handle, 0),
            busy,
            bits,
        )


class Sampler:
    """Samples one GPU on a background thread between start() and stop(): warm-up and timed window.

    Each sample carries its monotonic time, so the warm-up can ask how the clock and power moved over
    the last second and the timed window can be summarised on its own (`since`).
    ctypes releases the GIL during each NVML call and the main thread waits in a CUDA event, so the
    thread costs the measurement little (benchmarks/tester_telemetry_overhead.py measures how little).
    """

    def __init__(self, nvml: Nvml, handle: Any, interval_s: float) -> None:
        self.nvml, self.handle, self.interval_s = nvml, handle, interval_s
        self._interval = interval_s
        self.samples: list[tuple[Any, ...]] = []
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval_s: float | None = None) -> None:
        """Sample from now on, every `interval_s` this time (a steady rate asks for a shorter one)."""
        self._interval = interval_s or self.interval_s
        self.samples, self.times, self._stop = [], [], threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                sample = self.nvml.sample(self.handle)
            except Exception:  # a driver hiccup ends the sampling, never the measurement
                return
            self.times.append(time.monotonic())
            self.samples.append(sample)
            if self._stop.wait(self._interval):
                return

    def between(self, lo: float, hi: float) -> list[tuple[Any, ...]]:
        """The samples taken in [lo, hi) (monotonic seconds)."""
        return [s for t, s in zip(list(self.times), list(self.samples)) if lo <= t < hi]  # noqa: B905

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return summarize(self.samples)


def _median(values: list[Any], digits: int = 0) -> Any:
    got = [v for v in values if v is not None]
    if not got:
        return None
    value = statistics.median(got)
    return round(value, digits) if digits else round(value)


def summarize(samples: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Medians of one measurement's samples, and the share of samples each clock event reason was on."""
    if not samples:
        return {"samples": 0}
    sm, mem, power, temp, busy, bits = (list(col) for col in zip(*samples))  # noqa: B905 (3.8)
    known = [b for b in bits if b is not None]
    reasons = {
        name: round(sum(1 for b in known if b & bit) / len(known), 2)
        for bit, name in REASON_BITS
        if any(b & bit for b in known)
    }
    temps = [t for t in temp if t is not None]
    return {
        "samples": len(samples),
        "sm_clock_mhz": _median(sm),
        "sm_clock_min_mhz": min((v for v in sm if v is not None), default=None),
        "mem_clock_mhz": _median(mem),
        "power_w": _median(power, 1),
        "temp_c": _median(temp),
        "temp_max_c": max(temps) if temps else None,
        "util_pct": _median(busy),
        "reasons": reasons,
    }


def verdict(static: dict[str, Any], measured: list[tuple[str, dict[str, Any]]]) -> tuple[str, list[str]]:
    """nominal | power-capped | thermal | clocks-held, with the evidence, from one GPU's measurements.

    A reason counts when it was on in at least REASON_SHARE of one measurement's samples; "idle"
    never counts (it is the driver's word for the gaps between kernels).
    """
    strongest: dict[str, tuple[float, str, dict[str, Any]]] = {}
    hottest: tuple[int, str] | None = None
    for label, tel in measured:
        for name, share in (tel.get("reasons") or {}).items():
            if name == "idle" or share < REASON_SHARE:
                continue
            best = strongest.get(name)
            clock = tel.get("sm_clock_mhz") or 0
            if best is None or (share, -clock) > (best[0], -(best[2].get("sm_clock_mhz") or 0)):
                strongest[name] = (share, label, tel)
        if tel.get("temp_max_c") is not None and (hottest is None or tel["temp_max_c"] > hottest[0]):
            hottest = (tel["temp_max_c"], label)
    evidence: list[str] = []
    found: list[str] = []
    max_mhz = static.get("sm_clock_max_mhz")

    def clock_text(tel: dict[str, Any]) -> str:
        sm = tel.get("sm_clock_mhz")
        return f"SM {sm} of {max_mhz} MHz" if sm and max_mhz else (f"SM {sm} MHz" if sm else "")

    slowdown = static.get("slowdown_temp_c")
    thermal = [n for n in ("hw-thermal", "sw-thermal") if n in strongest]
    if thermal or (hottest and slowdown and hottest[0] >= slowdown):
        found.append("thermal")
        for name in thermal:
            share, label, tel = strongest[name]
            evidence.append(
                f"{name} in {share:.0%} of {label} samples, {tel.get('temp_max_c')} °C, {clock_text(tel)}"
            )
        if hottest and slowdown and hottest[0] >= slowdown:
            evidence.append(f"{hottest[0]} °C in {hottest[1]}, slowdown at {slowdown} °C")
    power = [n for n in ("sw-power-cap", "hw-power-brake") if n in strongest]
    if power:
        found.append("power-capped")
        for name in power:
            share, label, tel = strongest[name]
            watts = f"{tel.get('power_w')} of {static.get('power_limit_w')} W" if tel.get("power_w") else ""
            where = ", ".join(filter(None, [watts, clock_text(tel)]))
            evidence.append(f"{name} in {share:.0%} of {label} samples, {where}")
    held = [n for n in ("app-clocks", "hw-slowdown", "sync-boost", "display-clocks") if n in strongest]
    if held:
        found.append("clocks-held")
        for name in held:
            share, label, tel = strongest[name]
            extra = (
                f", application clock {static.get('app_sm_clock_mhz')} MHz" if name == "app-clocks" else ""
            )
            evidence.append(f"{name} in {share:.0%} of {label} samples, {clock_text(tel)}{extra}")
    return (found[0] if found else "nominal"), evidence


# -- timing ------------------------------------------------------------------------------------


class Clock:
    """Deadlines inside the run's budget, so a slow GPU or CPU shortens the run instead of overrunning."""

    def __init__(self, budget: float) -> None:
        self.budget = budget

    def left(self) -> float:
        return self.budget - (time.monotonic() - T0)


def time_gpu(
    torch: Any, step: Any, *, target_ms: float, repeats: int, warm_ms: float, sampler: Sampler | None = None
) -> float:
    """Median milliseconds per call of `step(i)`: warm-up, then events around loops of N calls.

    A sampler runs over the timed loops only (the warm-up has ended and synchronised before it starts).
    """
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
    if sampler is not None:
        sampler.start()
    for _ in range(repeats):
        start.record()
        for _ in range(iters):
            step(i)
            i += 1
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    if sampler is not None:
        sampler.stop()
    return statistics.median(samples)


class Steady:
    """How a rate is taken at steady state: chunk length, settle period and tolerances, window length.

    Measured on an H100 (benchmarks/RESULTS.md): under its power cap the card's power management
    swings the SM clock with a period near one second for the first seconds of full load, so a window
    shorter than a few periods catches a high or a low of the swing. The warm-up therefore compares
    whole periods: it ends when three consecutive periods' rates, median SM clocks and median powers
    agree within the tolerances, and the timed window then spans several periods (four seconds for
    the half-precision headline rates, two for fp32/tf32). With two-second windows and a two-period
    rule, six runs on that card spread 3 % (benchmarks/RESULTS.md).

    On an H200 the swing never quite ends under the cap: half-second bins alternate ±3 % for as
    long as the load lasts, while whole seconds agree within 0.5 % (benchmarks/tester_phases.py).
    So a rate measured after another on the same card (`follow_on`), which finds it at full load
    already, needs no cold warm-up: its periods are whole seconds, it is settled when `agree` (2)
    consecutive periods agree, and the last of them is its window (`warm_max_s` then bounds both).
    """

    def __init__(
        self,
        window_s: float,
        period_s: float,
        warm_max_s: float,
        *,
        agree: int = 3,
        follow_on: bool = False,
    ) -> None:
        self.window_s = window_s
        self.period_s = period_s
        self.warm_max_s = warm_max_s
        self.agree = agree
        self.follow_on = follow_on
        self.chunk_ms = 50.0  # one event-timed chunk: the unit of the best burst
        self.rate_tol = 0.01
        self.clock_tol = 0.02
        self.power_tol = 0.05

    def sample_interval(self, requested_s: float) -> float:
        """The interval asked for, shortened so that the shorter of a settle period and the window
        spans twice MIN_WINDOW_SAMPLES of them: each holds at least MIN_WINDOW_SAMPLES samples even
        when every NVML read takes as long as the wait (a period's medians and the window's summary
        describe it, not one reading at idle power). The default 20 ms is already shorter."""
        return min(requested_s, min(self.period_s, self.window_s) / (2 * MIN_WINDOW_SAMPLES))


def _changed(old: Any, new: Any, tol: float) -> bool:
    return bool(old and new) and abs(new - old) / old > tol


def _settled(chunks: list[tuple[float, float, float]], sampler: Sampler | None, how: Steady) -> bool:
    """Did the last `how.agree` periods agree (rate, median SM clock, median power), each with the
    one before it? On a cold card two agreeing periods in a row can be a swing's high and low met
    halfway; three consecutive ones were not, on the H100 measured (a later rate, on a card at full
    load already, asks two). chunks: (t_end, ms, flops)."""
    now = chunks[-1][0]
    spans = [
        (now - (k + 1) * how.period_s, now - k * how.period_s + (1 if k == 0 else 0))
        for k in range(how.agree - 1, -1, -1)
    ]
    rates, clocks, powers = [], [], []
    for lo, hi in spans:
        inside = [(ms, fl) for t, ms, fl in chunks if lo <= t < hi]
        if not inside:
            return False
        rates.append(sum(fl for _, fl in inside) / sum(ms for ms, _ in inside))
        tel = summarize(sampler.between(lo, hi)) if sampler is not None else {}
        clocks.append(tel.get("sm_clock_mhz"))
        powers.append(tel.get("power_w"))
    return not any(
        _changed(rates[k], rates[k + 1], how.rate_tol)
        or _changed(clocks[k], clocks[k + 1], how.clock_tol)
        or _changed(powers[k], powers[k + 1], how.power_tol)
        for k in range(how.agree - 1)
    )


def steady_rate(
    torch: Any, step: Any, flops: float, how: Steady, sampler: Sampler | None = None
) -> dict[str, Any]:
    """The sustained rate of `step(i)` (flops each): warm up until settled, then one timed window.

    Every chunk of calls is timed with CUDA events; the headline is the window's total work over its
    total time (not a median of short loops, which a clock swing can flatter), and the best single
    chunk seen (warm-up included) is reported apart as the burst. Telemetry covers the window only.
    """
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    i = 0

    def chunk(calls: int) -> float:
        nonlocal i
        start.record()
        for _ in range(calls):
            step(i)
            i += 1
        end.record()
        end.synchronize()
        return max(start.elapsed_time(end), 1e-6)

    chunk(3)  # loads the kernels (cuBLAS picks its algorithm here): too slow to size chunks by
    per_call = chunk(3) / 3
    calls = max(1, min(1000, math.ceil(how.chunk_ms / per_call)))
    if sampler is not None:
        sampler.start(how.sample_interval(sampler.interval_s))
    warm: list[tuple[float, float, float]] = []
    began = time.monotonic()
    settled = False
    while time.monotonic() - began < how.warm_max_s:
        ms = chunk(calls)
        warm.append((time.monotonic(), ms, calls * flops))
        if ms < how.chunk_ms / 2:  # sized on a slow first call: longer chunks, fewer sync gaps
            calls = max(1, min(1000, math.ceil(how.chunk_ms * calls / ms)))
        if warm[-1][0] - began >= how.agree * how.period_s and _settled(warm, sampler, how):
            settled = True
            break
    if how.follow_on:  # the last period (agreeing with the one before it, when settled) is the window
        window_end = warm[-1][0]
        window_start = window_end - how.period_s
        timed = [ms for t, ms, _ in warm if t > window_start] or [warm[-1][1]]
        warm_s = window_start - began
    else:
        warm_s = time.monotonic() - began
        window_start = time.monotonic()
        timed = []
        while sum(timed) < how.window_s * 1e3:
            timed.append(chunk(calls))
        window_end = time.monotonic()
    samples = sampler.between(window_start, window_end + 1) if sampler is not None else []
    if sampler is not None:
        sampler.stop()
    total_ms = sum(timed)
    chunk_flops = calls * flops
    rates = [chunk_flops / (ms * 1e-3) / 1e12 for ms in timed]
    burst = max(rates + [fl / (ms * 1e-3) / 1e12 for _, ms, fl in warm])
    return {
        "tflops": round(chunk_flops * len(timed) / (total_ms * 1e-3) / 1e12, 2),
        "median_ms": round(total_ms / (calls * len(timed)), 4),
        "burst_tflops": round(burst, 2),
        "window_s": round(total_ms / 1e3, 3),
        "window_spread_pct": round(100 * (max(rates) / min(rates) - 1), 1),
        "warmup_s": round(warm_s, 2),
        "settled": settled,
        "chunks": len(timed),
        "chunk_calls": calls,
        "telemetry": summarize(samples) if sampler is not None else None,
    }


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
        # four significant digits: a loaded machine's small sizes run well under 1 GFLOP/s
        gflops = float(f"{2 * n**3 / med / 1e9:.4g}")
        best = {"size": n, "median_ms": round(med * 1e3, 4), "gflops": gflops}
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


def operands(torch: Any, n: int, dtype: Any, gen: Any, half: bool) -> Any:
    """Random n×n operands. Half-precision ones take values exact in both bf16 and fp16 (normal
    values rounded to bf16), so fp16 and bf16, equal on every datasheet, are compared on the same
    numbers: full-mantissa fp16 data toggles more multiplier bits and, under a power cap, measured
    about 4 % slower on an H100 (benchmarks/RESULTS.md), which is the data, not the datapath."""
    x = torch.randn(n, n, device=gen.device, generator=gen)
    return x.to(torch.bfloat16).to(dtype) if half else x.to(dtype)


def matmul_dtype(
    torch: Any,
    dev: Any,
    name: str,
    n: int,
    l2_bytes: int,
    how: Steady,
    sampler: Sampler | None = None,
) -> dict[str, Any]:
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        name
    ]
    half = name in ("fp16", "bf16")
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    item = torch.tensor([], dtype=dtype).element_size()
    pair = 2 * n * n * item
    sets = max(2, min(8, math.ceil(2 * l2_bytes / pair) + 1))
    gen = torch.Generator(device=dev).manual_seed(1234 + n)
    a = [operands(torch, n, dtype, gen, half) for _ in range(sets)]
    b = [operands(torch, n, dtype, gen, half) for _ in range(sets)]
    c = torch.empty(n, n, device=dev, dtype=dtype)

    def step(i: int) -> None:
        torch.mm(a[i % sets], b[i % sets], out=c)

    row = steady_rate(torch, step, 2.0 * n**3, how, sampler)
    if row["telemetry"] is None:
        del row["telemetry"]
    row.update(check_product(torch, n, dtype, gen, c, name))
    torch.backends.cuda.matmul.allow_tf32 = False
    return row


def check_product(torch: Any, n: int, dtype: Any, gen: Any, c: Any, name: str) -> dict[str, Any]:
    """Correctness on fresh inputs: poison the output, check every element was written, then a sample
    of rows x columns against float64 products of the same inputs."""
    x = torch.randn(n, n, device=c.device, dtype=dtype, generator=gen)
    y = torch.randn(n, n, device=c.device, dtype=dtype, generator=gen)
    c.fill_(float("nan"))
    torch.mm(x, y, out=c)
    return {
        "rel_err": None,
        "bound": ERROR_BOUNDS[name],
        "ok": False,
        **sample_error(torch, x, y, c, name, gen),
    }


def sample_error(torch: Any, x: Any, y: Any, c: Any, name: str, gen: Any) -> dict[str, Any]:
    """‖c − x·y‖/‖x·y‖ on 128 random rows × columns against float64, and whether it is in bounds."""
    n = x.shape[0]
    written = bool(torch.isfinite(c).all().item())
    rows = torch.randperm(n, device=c.device, generator=gen)[:128]
    cols = torch.randperm(n, device=c.device, generator=gen)[:128]
    ref = x[rows].double() @ y[:, cols].double()
    got = c[rows][:, cols].double()
    rel = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
    ok = written and math.isfinite(rel) and rel <= ERROR_BOUNDS[name]
    return {"rel_err": rel if math.isfinite(rel) else None, "ok": ok}


def bandwidth(torch: Any, dev: Any, quick: bool, free: int, sampler: Sampler | None = None) -> dict[str, Any]:
    """Device copy (bytes read + written) and pinned host<->device copies, in decimal GB/s."""
    size = min((256 if quick else 1024) * MIB, free // 6)
    src = torch.randn(size // 4, device=dev)
    dst = torch.empty_like(src)
    reps = 5 if quick else 9
    ms = time_gpu(torch, lambda i: dst.copy_(src), target_ms=20, repeats=reps, warm_ms=20, sampler=sampler)
    copy_telemetry = summarize(sampler.samples) if sampler is not None else None
    d2d = 2 * size / (ms * 1e-3) / 1e9
    hsize = 64 * MIB  # PCIe reaches its rate well below this; pinning 256 MiB cost ~0.3 s a run
    host = torch.randn(hsize // 4).pin_memory()
    dbuf = torch.empty(hsize // 4, device=dev)
    reps = 3 if quick else 5
    h2d = time_gpu(
        torch, lambda i: dbuf.copy_(host, non_blocking=True), target_ms=20, repeats=reps, warm_ms=10
    )
    d2h = time_gpu(
        torch, lambda i: host.copy_(dbuf, non_blocking=True), target_ms=20, repeats=reps, warm_ms=10
    )
    out = {
        "d2d_gbps": round(d2d, 1),
        "d2d_bytes": size,
        "h2d_pinned_gbps": round(hsize / (h2d * 1e-3) / 1e9, 2),
        "d2h_pinned_gbps": round(hsize / (d2h * 1e-3) / 1e9, 2),
    }
    if copy_telemetry is not None:
        out["telemetry"] = copy_telemetry
    return out


def clock_context(row: dict[str, Any], peak_tflops: Any, ref_mhz: int | None) -> None:
    """The rate the observed SM clock allows (peak × observed / reference clock) and the share reached."""
    sm = (row.get("telemetry") or {}).get("sm_clock_mhz")
    if isinstance(peak_tflops, (int, float)) and peak_tflops > 0 and sm and ref_mhz:
        row["at_clock_tflops"] = round(peak_tflops * sm / ref_mhz, 1)
        row["pct_of_clock"] = pct(row["tflops"], row["at_clock_tflops"])


def telemetry_text(row: dict[str, Any]) -> str:
    tel = row.get("telemetry") or {}
    if not tel.get("samples"):
        return ""
    parts = [f"SM {tel.get('sm_clock_mhz')} MHz"]
    if tel.get("power_w") is not None:
        parts.append(f"{tel['power_w']:.0f} W")
    if tel.get("temp_c") is not None:
        parts.append(f"{tel['temp_c']} °C")
    if row.get("pct_of_clock") is not None:
        parts.append(f"{row['pct_of_clock']}% of {row['at_clock_tflops']} at that clock")
    return "  [" + ", ".join(parts) + "]"


def device_telemetry(nvml: Nvml | None, why: str | None, props: Any, index: int, interval_s: float) -> tuple:
    """(sampler or None, the device's telemetry record so far); never raises."""
    if nvml is None:
        return None, {"available": False, "reason": why}
    try:
        handle = nvml.handle(props, index)
        if handle is None:
            return None, {"available": False, "reason": "NVML does not list this CUDA device"}
        record = {"available": True, **nvml.static(handle), "health": nvml.health(handle)}
        return Sampler(nvml, handle, interval_s), record
    except Exception as exc:  # an old or partial NVML: measure without telemetry
        return None, {"available": False, "reason": f"NVML: {type(exc).__name__}: {exc}"[:200]}


# The default run's plan (tester 1.3): the headline rate first, on a card still cold, so a short
# budget drops the lesser rates, never the one users quote; the card then stays at full load, so the
# rates after it settle in shorter periods. benchmarks/tester_phases.py traced why (RESULTS.md).
RATE_ORDER = ("bf16", "fp16", "tf32", "fp32")  # bf16 drops out where the GPU has no native bf16
COLD_PERIOD_S = 1.0  # the first rate: a cold card's clock swings with a period near a second
FOLLOW_PERIOD_S = 1.0  # every later rate: whole seconds, which the swing under a cap averages out in
RATE_OVERHEAD_S = 0.4  # a rate's operands, its first (kernel-loading) calls and its correctness check
TAIL_S = 1.2  # after the rates: the copies, the telemetry verdict, the result line


def rate_order(dtypes: list[str], bf16_ok: bool) -> list[str]:
    """The order rates are measured in: the headline (bf16, else fp16) first, then the other
    half-precision rate, tf32 and fp32; only those asked for, bf16 only where it is native."""
    return [d for d in RATE_ORDER if d in dtypes and (d != "bf16" or bf16_ok)]


def natural_plan(args: argparse.Namespace, name: str, first: bool) -> Steady:
    """One rate's plan when the budget is no constraint.

    The first rate on a card (the headline) starts it from rest: three agreeing one-second periods,
    at most 6 s (`--quick`: 3.5 s), then its own window of 2 s (1 s for tf32/fp32 when they come
    first; `--quick` 1 s). Every later rate finds the card at full load: two agreeing one-second
    periods, the last of them its window, at most 3.2 s (`--quick` 2.2 s). `--window` gives every rate
    a window of its own of that length after two agreeing periods.
    """
    if first:
        window = 1.0 if args.quick or name not in HEADLINE_DTYPES else 2.0
        return Steady(args.window or window, COLD_PERIOD_S, 3.5 if args.quick else 6.0)
    if args.window:
        return Steady(args.window, FOLLOW_PERIOD_S, 3.2, agree=2)
    cap = 2.2 if args.quick else 3.2  # --quick: two periods, no third
    return Steady(FOLLOW_PERIOD_S, FOLLOW_PERIOD_S, cap, agree=2, follow_on=True)


def _least_warm(how: Steady) -> float:
    return how.agree * how.period_s + 0.2


def rate_cost(args: argparse.Namespace, name: str, first: bool, *, least: bool = False) -> float:
    """Seconds one rate takes at most (least: with the shortest warm-up and window it may have)."""
    how = natural_plan(args, name, first)
    window = 0.0 if how.follow_on else (1.0 if least else how.window_s)
    return (_least_warm(how) if least else how.warm_max_s) + window + RATE_OVERHEAD_S


def run_estimate(args: argparse.Namespace, count: int = 1) -> float:
    """What the measurements take at most on `count` GPUs, start-up excluded (for the budget warning)."""
    order = rate_order(args.dtype_list, True)
    rates = sum(rate_cost(args, d, i == 0) for i, d in enumerate(order))
    return count * (rates + TAIL_S)


def steady_plan(
    args: argparse.Namespace, left: float, name: str, after: list[str], first: bool
) -> Steady | None:
    """This rate's plan from the `left` seconds, or None when they cannot hold even its shortest
    settled measurement (then it is skipped, and said).

    The first rate (the headline) takes its natural plan whatever follows; a later one takes its
    own while the rates `after` it keep their least. Short of that a rate shrinks (its warm-up cap
    first, to the periods that must agree, then its own window, to 1 s), and what comes after it
    is skipped.
    """
    how = natural_plan(args, name, first)
    least = rate_cost(args, name, first, least=True)
    if left < least:
        return None
    keep = 0.0 if first else sum(rate_cost(args, d, False, least=True) for d in after)
    own = min(rate_cost(args, name, first), max(left - keep, least))
    spare = own - RATE_OVERHEAD_S
    if not how.follow_on:
        how.window_s = max(1.0, min(how.window_s, spare - _least_warm(how)))
        spare -= how.window_s
    how.warm_max_s = max(_least_warm(how), min(how.warm_max_s, spare))
    return how


def budget_warning(args: argparse.Namespace, clock: Clock, count: int, warnings: list[str]) -> None:
    """Say before measuring when the budget cannot hold every rate asked for at its settled length:
    the headline goes first, so what gives is the later rates (shortened, or skipped and listed)."""
    need = run_estimate(args, count)
    left = clock.left()
    if left >= need:
        return
    order = rate_order(args.dtype_list, True)
    warnings.append(
        f"the budget leaves {max(left, 0):.1f}s for measuring, under the {need:.0f}s that every rate "
        f"asked for may take to settle: {order[0] if order else 'the headline'} goes first; later "
        "rates shorten or are skipped, each said below"
    )
    say(f"warning: {warnings[-1]}")


def measure_device(
    torch: Any,
    index: int,
    args: argparse.Namespace,
    clock: Clock,
    peaks: dict[str, Any],
    share: float,
    nvml: Nvml | None = None,
    nvml_why: str | None = "telemetry off",
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    warnings = [] if warnings is None else warnings
    began = time.monotonic()
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    free, total = torch.cuda.mem_get_info(dev)  # the first call that needs the CUDA context
    phases: dict[str, float] = {"context": round(time.monotonic() - began, 2)}
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
    sampler, telemetry = device_telemetry(nvml, nvml_why, props, index, args.telemetry_ms / 1000)
    # datasheets quote tensor-core peaks at one clock (H100 SXM: 1830 MHz) and FP32 at the max boost
    # (1980 MHz): the table's peak_clock_mhz where it has one, else the max NVML reports
    ref_mhz = peak.get("peak_clock_mhz") or telemetry.get("sm_clock_max_mhz")
    fp32_ref_mhz = telemetry.get("sm_clock_max_mhz") or peak.get("peak_clock_mhz")
    if telemetry["available"]:
        telemetry["clock_ref_mhz"] = ref_mhz
        telemetry["clock_ref_source"] = "datasheet" if peak.get("peak_clock_mhz") else "nvml-max"
    n = args.size or choose_size(props, args.quick)
    matmul: dict[str, Any] = {"size": n}
    deadline = time.monotonic() + share
    native = bf16_native(torch)
    todo = rate_order(args.dtype_list, native)
    skipped: list[str] = []
    if "bf16" in args.dtype_list and not native:
        skipped.append(f"gpu{index}:bf16:unsupported")
        say(f"gpu{index} bf16: skipped, this GPU has no native bf16")
    measured: list[tuple[str, dict[str, Any]]] = []
    findings: list[str] = []
    for k, name in enumerate(todo):
        left = min(deadline - time.monotonic(), clock.left() - TAIL_S)
        first = len(matmul) == 1  # nothing measured on this card yet: it is still cold
        plan = steady_plan(args, left, name, todo[k + 1 :], first)
        if plan is None:
            skipped.append(f"gpu{index}:{name}:budget")
            need = rate_cost(args, name, first, least=True)
            have = max(left, 0)
            say(f"gpu{index} {name}: skipped, the budget has {have:.1f}s left and it needs {need:.1f}s")
            continue
        natural = natural_plan(args, name, first)
        if k == 0 and (plan.window_s < natural.window_s or plan.warm_max_s < natural.warm_max_s):
            warnings.append(
                f"gpu{index} {name}: the budget leaves {max(left, 0):.1f}s, under the "
                f"{rate_cost(args, name, first):.1f}s its settled rate may take: warm-up capped at "
                f"{plan.warm_max_s:.1f}s, window {plan.window_s:.1f}s"
            )
            say(f"warning: {warnings[-1]}")
        began = time.monotonic()
        row = matmul_dtype(torch, dev, name, n, l2, plan, sampler)
        phases[name] = round(time.monotonic() - began, 2)
        row["pct_of_peak"] = pct(row["tflops"], peak.get(PEAK_KEYS[name]))
        clock_context(row, peak.get(PEAK_KEYS[name]), fp32_ref_mhz if name == "fp32" else ref_mhz)
        matmul[name] = row
        if row.get("telemetry", {}).get("samples"):
            measured.append((name, row["telemetry"]))
        if row.get("pct_of_clock") is not None and row["pct_of_clock"] < FAR_BELOW_CLOCK:
            findings.append(
                f"{name} reached {row['pct_of_clock']}% of the {row['at_clock_tflops']} TFLOP/s its "
                f"{row['telemetry']['sm_clock_mhz']} MHz clock allows: slow for a reason other than clocks"
            )
        check = (
            f"rel_err={row['rel_err']:.2e} {'ok' if row['ok'] else 'FAIL'}"
            if row["rel_err"] is not None
            else "FAIL"
        )
        say(
            f"gpu{index} {name:<4} n={n}: {row['tflops']:8.1f} TFLOP/s{of_peak(row['pct_of_peak'])}"
            f" sustained over {row['window_s']:.1f}s after {row['warmup_s']:.1f}s warm-up"
            f"{'' if row['settled'] else ' (not settled)'}, burst {row['burst_tflops']:.1f}  {check}"
            + telemetry_text(row)
        )
    info["matmul"] = matmul
    if clock.left() > 1:
        began = time.monotonic()
        bw = bandwidth(torch, dev, args.quick, free, sampler)
        phases["copy"] = round(time.monotonic() - began, 2)
        bw["d2d_pct_of_peak"] = pct(bw["d2d_gbps"], peak.get("mem_bw_gbps"))
        info["bandwidth"] = bw
        if bw.get("telemetry", {}).get("samples"):
            measured.append(("copy", bw["telemetry"]))
        say(
            f"gpu{index} copy: device {bw['d2d_gbps']:.0f} GB/s (read+write){of_peak(bw['d2d_pct_of_peak'])}"
            f", pinned h2d {bw['h2d_pinned_gbps']:.1f} GB/s, d2h {bw['d2h_pinned_gbps']:.1f} GB/s"
            + telemetry_text(bw)
        )
    else:
        skipped.append(f"gpu{index}:bandwidth:budget")
    if telemetry["available"]:
        telemetry["verdict"], telemetry["evidence"] = verdict(telemetry, measured)
        telemetry["findings"] = findings
        limits = (
            f"SM max {telemetry.get('sm_clock_max_mhz')} MHz, power limit {telemetry.get('power_limit_w')} W"
        )
        say(f"gpu{index} clocks: {telemetry['verdict']} ({limits})")
        for line in telemetry["evidence"] + findings:
            say(f"gpu{index}   {line}")
    info["telemetry"] = telemetry
    info["skipped"] = skipped
    info["phases"] = phases
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


# -- burn: sustained load with result checking ------------------------------------------------

BURN_CHECK_S = 2.0  # how often each GPU recomputes the reference product and compares
BURN_INTERVAL_S = 5.0  # one telemetry row per this many seconds


def burn_check(torch: Any, x: Any, y: Any, first: Any, got: Any, name: str, gen: Any) -> dict[str, Any]:
    """Judge one recomputation `got` of x·y against the first product `first` (any torch device).

    Silent data corruption is the failure that matters, so a check fails (`error`) when the product
    is wrong beyond what rounding explains: not finite, outside the dtype's bound against a float64
    reference on 128 sampled rows × columns, or, where it differs from the first product at all, any
    element further from that product than the bound allows (`deviation`: |got − first| over
    |first| + the product's RMS, so elements near zero are not judged by their own tiny size). That
    last comparison covers every element, which the sampled reference cannot.

    A bitwise difference alone (`mismatch`) is reported but does not fail: cuBLAS may pick another
    kernel or split the reduction differently between calls (heuristics, workspace, split-K), and a
    different summation order legitimately changes the last bit of an element. Such a change stays
    within one unit in the last place, far inside the bound; corruption that flips a low mantissa bit
    looks the same and is only counted, while any larger change fails.
    """
    out = sample_error(torch, x, y, got, name, gen)
    mismatch = not bool(torch.equal(got, first))
    deviation = None
    if mismatch and out["ok"]:
        ref = first.float()
        floor = torch.linalg.vector_norm(ref) / math.sqrt(ref.numel())
        deviation = ((got.float() - ref).abs() / (ref.abs() + floor)).max().item()
        out["ok"] = math.isfinite(deviation) and deviation <= ERROR_BOUNDS[name]
        deviation = deviation if math.isfinite(deviation) else None
    return {"error": not out["ok"], "mismatch": mismatch, "rel_err": out["rel_err"], "deviation": deviation}


def burn_device(torch: Any, index: int, seconds: float, sampler: Sampler | None) -> dict[str, Any]:
    """Full load on one GPU for `seconds`, recomputing a fixed product every BURN_CHECK_S and judging
    it with burn_check: `errors` (wrong beyond rounding) fail the run, `mismatches` (bitwise only)
    are counted. Telemetry is summarised per BURN_INTERVAL_S.
    """
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    name = "bf16" if bf16_native(torch) else "fp16"
    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    props = torch.cuda.get_device_properties(dev)
    n = choose_size(props, False)
    gen = torch.Generator(device=dev).manual_seed(4321 + index)
    a = [operands(torch, n, dtype, gen, True) for _ in range(4)]
    b = [operands(torch, n, dtype, gen, True) for _ in range(4)]
    c = torch.empty(n, n, device=dev, dtype=dtype)
    x, y = operands(torch, n, dtype, gen, True), operands(torch, n, dtype, gen, True)
    first = torch.mm(x, y)
    check = torch.empty_like(first)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    checks = errors = mismatches = 0
    worst, deviation = 0.0, None
    rows: list[dict[str, Any]] = []
    done_ms, done_flops, i = 0.0, 0.0, 0
    row_ms, row_flops = 0.0, 0.0
    if sampler is not None:
        sampler.start()
    began = time.monotonic()
    row_start = next_check = began
    while time.monotonic() - began < seconds:
        start.record()
        for _ in range(10):
            torch.mm(a[i % 4], b[i % 4], out=c)
            i += 1
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        done_ms, done_flops = done_ms + ms, done_flops + 10 * 2.0 * n**3
        row_ms, row_flops = row_ms + ms, row_flops + 10 * 2.0 * n**3
        now = time.monotonic()
        if now >= next_check:
            next_check = now + BURN_CHECK_S
            check.fill_(float("nan"))
            torch.mm(x, y, out=check)
            checks += 1
            got = burn_check(torch, x, y, first, check, name, gen)
            mismatches += got["mismatch"]
            errors += got["error"]
            worst = max(worst, got["rel_err"] if got["rel_err"] is not None else math.inf)
            if got["deviation"] is not None:
                deviation = max(deviation or 0.0, got["deviation"])
        if now - row_start >= BURN_INTERVAL_S or now - began >= seconds:
            tel = summarize(sampler.between(row_start, now + 1)) if sampler is not None else {}
            rows.append(
                {
                    "t_s": round(now - began, 1),
                    "tflops": round(row_flops / (row_ms * 1e-3) / 1e12, 1),
                    "sm_clock_mhz": tel.get("sm_clock_mhz"),
                    "power_w": tel.get("power_w"),
                    "temp_max_c": tel.get("temp_max_c"),
                    "reasons": tel.get("reasons", {}),
                }
            )
            row_start, row_ms, row_flops = now, 0.0, 0.0
    if sampler is not None:
        sampler.stop()
    return {
        "index": index,
        "dtype": name,
        "size": n,
        "seconds": round(time.monotonic() - began, 1),
        "tflops": round(done_flops / (done_ms * 1e-3) / 1e12, 2) if done_ms else None,
        "checks": checks,
        "errors": errors,
        "mismatches": mismatches,
        "worst_rel_err": worst if math.isfinite(worst) else None,
        "max_deviation": deviation,
        "bound": ERROR_BOUNDS[name],
        "intervals": rows,
    }


def dcgm_diag(timeout_s: float = 300.0) -> dict[str, Any]:
    """NVIDIA DCGM's short diagnostic (`dcgmi diag -r 1`) when the image carries it; else say so."""
    import shutil
    import subprocess

    exe = shutil.which("dcgmi")
    if exe is None:
        return {"available": False, "reason": "dcgmi is not in this image"}
    try:
        done = subprocess.run(
            [exe, "diag", "-r", "1"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"available": True, "passed": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    text = (done.stdout + done.stderr)[-4000:]
    failed = done.returncode != 0 or "fail" in text.lower()
    return {"available": True, "passed": not failed, "exit_code": done.returncode, "output": text}


def burn(torch: Any, count: int, seconds: float, nvml: Nvml | None, interval_s: float) -> dict[str, Any]:
    """Every GPU at full load at once (one thread each: CUDA waits release the GIL), then DCGM."""
    results: list[dict[str, Any] | None] = [None] * count
    failures: list[str] = []

    def work(index: int) -> None:
        try:
            sampler = None
            if nvml is not None:
                props = torch.cuda.get_device_properties(index)
                handle = nvml.handle(props, index)
                sampler = Sampler(nvml, handle, interval_s) if handle is not None else None
            results[index] = burn_device(torch, index, seconds, sampler)
        except Exception as exc:  # a CUDA error under load is a finding, reported for that GPU
            failures.append(f"gpu{index}: {type(exc).__name__}: {exc}"[:300])

    say(f"burn: {seconds:g}s of full load on {count} GPU(s), results checked every {BURN_CHECK_S:g}s")
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    devices = [r for r in results if r is not None]
    for r in devices:
        last = r["intervals"][-1] if r["intervals"] else {}
        say(
            f"gpu{r['index']} burn {r['dtype']} {r['seconds']:g}s: {r['tflops']} TFLOP/s, "
            f"{r['checks']} checks, {r['errors']} errors, {r['mismatches']} mismatches"
            + (
                f"; last {BURN_INTERVAL_S:g}s: SM {last.get('sm_clock_mhz')} MHz, {last.get('power_w')} W, "
                f"{last.get('temp_max_c')} °C"
                if last
                else ""
            )
        )
    dcgm = dcgm_diag()
    say(f"dcgm diag: {'not run (' + dcgm['reason'] + ')' if not dcgm['available'] else dcgm.get('passed')}")
    errors = sum(r["errors"] for r in devices) + len(failures)
    return {"seconds": seconds, "devices": devices, "failures": failures, "errors": errors, "dcgm": dcgm}


# -- the run -----------------------------------------------------------------------------------


def no_telemetry(reason: str) -> dict[str, Any]:
    say(f"telemetry: unavailable ({reason})")
    return {"available": False, "source": None, "interval_ms": None, "reason": reason}


def run(args: argparse.Namespace, reexec: bool = False) -> dict[str, Any]:
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
        "warnings": [],
    }
    phases: dict[str, Any] = {}
    result["phases"] = phases
    # the driver first (retried in a fresh process), then the image's own toolkit, then torch
    cuda_init_record = cuda_init(reexec)
    cudart = probe_cudart()
    peaks = load_peaks(args.peaks)
    phases["cuda_init"] = round(time.monotonic() - T0, 2)
    try:
        import torch
    except ImportError as exc:
        result.update(reason="no-torch", error=str(exc), env=environment(None))
        result["env"]["cuda_init"] = cuda_init_record
        result["telemetry"] = no_telemetry("no torch, nothing measured")
        return result
    phases["import_torch"] = round(time.monotonic() - T0 - phases["cuda_init"], 2)
    env = environment(torch)
    env["cudart"] = cudart
    env["cuda_init"] = cuda_init_record
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

    # a baseline for the speed-up figure only: half a second finds the CPU's rate at a size it fills
    cpu_s = args.cpu_budget or min(0.5, args.budget * 0.05)
    began = time.monotonic()
    cpu = cpu_baseline(torch, cpu_s)
    phases["cpu"] = round(time.monotonic() - began, 2)
    result["cpu"] = cpu
    say(f"cpu fp32 matmul n={cpu['size']}: {cpu['gflops']:.1f} GFLOP/s ({cpu['threads']} threads)")

    if not cuda_ok:
        result["mode"] = "cpu-only"
        say("CUDA is not available: CPU baseline only.")
        result["telemetry"] = no_telemetry("no CUDA device")
        if args.allow_cpu:
            result["status"] = "pass"
        else:
            result["reason"] = "no-cuda"
        return result

    say("CUDA is available. Running on GPU.")
    nvml, why = Nvml.open() if args.telemetry_ms else (None, "off: --telemetry-ms 0")
    if nvml is None:
        result["telemetry"] = no_telemetry(str(why))
    else:
        result["telemetry"] = {
            "available": True,
            "source": "nvml",
            "interval_ms": args.telemetry_ms,
            "reason": None,
        }
        say(
            f"telemetry: NVML every {args.telemetry_ms} ms during each timed loop "
            f"(more often where a rate's window would hold fewer than {MIN_WINDOW_SAMPLES} samples)"
        )
    count = env["device_count"]
    budget_warning(args, clock, count, result["warnings"])
    devices: list[dict[str, Any]] = []
    try:
        for index in range(count):
            share = max(1.0, (clock.left() - (8 if count > 1 else 0)) / (count - index))
            began = time.monotonic()
            devices.append(
                measure_device(torch, index, args, clock, peaks, share, nvml, why, result["warnings"])
            )
            phases[f"gpu{index}"] = {"total": round(time.monotonic() - began, 2), **devices[-1]["phases"]}
    finally:
        if nvml is not None:
            nvml.close()
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
                began = time.monotonic()
                ar = allreduce(torch, count, args.quick)
                phases["allreduce"] = round(time.monotonic() - began, 2)
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

    result["burn"] = None
    if args.burn:
        nvml_burn, _ = Nvml.open() if args.telemetry_ms else (None, None)
        try:
            result["burn"] = burn(torch, count, args.burn, nvml_burn, args.telemetry_ms / 1000)
        finally:
            if nvml_burn is not None:
                nvml_burn.close()

    if not main:
        result["reason"] = "budget-exceeded"
    elif not result["correct"]:
        result["reason"] = "incorrect-result"
    elif result["allreduce"] is not None and not result["allreduce"]["ok"]:
        result["reason"] = "allreduce-wrong"
    elif result["burn"] is not None and result["burn"]["errors"]:
        result["reason"] = "burn-errors"
    else:
        result["status"] = "pass"
    return result


def grace_seconds() -> float:
    """How long to stay alive after the result line: ACAGPU_RESULT_GRACE_S, default 15, 0 = not at all."""
    text = os.environ.get(GRACE_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_GRACE_S
    except ValueError:
        # never print the variable's name: it contains the result tag that log followers wait for
        say(f"result grace {text!r} is not a number of seconds; using {DEFAULT_GRACE_S:g}")
        value = DEFAULT_GRACE_S
    return min(max(value, 0.0), 3600.0) if math.isfinite(value) else DEFAULT_GRACE_S


def linger(seconds: float, code: int) -> None:
    """Keep the container (and so its log) alive; SIGTERM ends the wait at once with the same verdict."""
    if seconds <= 0:
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(code)

    with contextlib.suppress(ValueError):  # not the main thread (a test calling main()): a plain wait
        signal.signal(signal.SIGTERM, stop)
    time.sleep(seconds)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    grace = grace_seconds()
    try:
        result = run(args, reexec=argv is None)
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
    result["result_grace_s"] = grace
    code = EXIT_PASS if result["status"] == "pass" else EXIT_FAIL
    skipped = [s for s in result.get("skipped") or [] if not s.endswith(":unsupported")]
    say(
        f"status: {result['status']}"
        + (f" ({result['reason']})" if result.get("reason") else "")
        + f" in {result['elapsed_s']:.1f}s"
        + (f"; not measured: {', '.join(skipped)}" if skipped else "")
        + (f"; staying {grace:g}s so this log can still be read" if grace else "")
    )
    say(f"{RESULT_TAG} {json.dumps(result, separators=(',', ':'), sort_keys=True)}")
    linger(grace, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
