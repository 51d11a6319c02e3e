"""Parse what the gpu-tester printed into a `TesterResult`, from its own line or the seed's legacy format.

The tester prints exactly one `ACAGPU_RESULT {json}` line; logs may wrap it (ACA log-stream JSON
records with a `Log` field, or a timestamp prefix), so the line is found anywhere in a line. Output
of the seed's simple tester (`Elapsed Time: <s> seconds`) still parses, marked `legacy`: there is
no rate in it, only the one timing. No result at all raises `NoTesterResult`, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from aca_gpu.errors import BadInput

RESULT_TAG = "ACAGPU_RESULT"
DTYPES = ("fp32", "tf32", "fp16", "bf16")
_RESULT_RE = re.compile(rf"{RESULT_TAG}\s+(\{{.*\}})\s*$")
_ELAPSED_RE = re.compile(r"Elapsed Time:\s*([0-9.eE+-]+)\s*seconds")
_GPU_RE = re.compile(r"CUDA is available\. Running on GPU")
_CPU_RE = re.compile(r"CUDA is not available|Running on CPU")


class NoTesterResult(BadInput):
    """The text holds neither an ACAGPU_RESULT line nor the legacy `Elapsed Time:` line."""


@dataclass(frozen=True)
class DtypeRate:
    """One dtype's matmul figure on the first GPU."""

    tflops: float
    pct_of_peak: float | None = None
    ok: bool | None = None  # correctness against the float64 reference; None when not reported
    rel_err: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TesterResult:
    status: str  # "pass" | "fail"
    reason: str | None = None
    gpu_name: str | None = None
    gpu_count: int = 0
    rates: dict[str, DtypeRate] = field(default_factory=dict)
    per_gpu: tuple[dict[str, float], ...] = ()  # TFLOP/s per dtype for every GPU, by index
    bandwidth_gbps: dict[str, float] = field(default_factory=dict)  # d2d, h2d_pinned, d2h_pinned
    allreduce_busbw_gbps: float | None = None
    cpu_gflops: float | None = None
    speedup: float | None = None
    gpu_elapsed_s: float | None = None  # the main matmul's seconds (seed-compatible figure)
    elapsed_s: float | None = None  # the whole tester run
    correct: bool | None = None
    driver: str | None = None
    cuda_runtime: str | None = None  # torch's CUDA, or the image's libcudart when probed
    simulated: bool = False
    legacy: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in asdict(self).items() if k != "raw"}
        doc["rates"] = {k: v.as_dict() for k, v in self.rates.items()}
        return doc


def _unwrap(line: str) -> str:
    """A log-stream record ({"TimeStamp": ..., "Log": "..."}) carries the console line in `Log`."""
    text = line.strip()
    if text.startswith("{") and '"Log"' in text:
        try:
            record = json.loads(text)
        except ValueError:
            return line
        if isinstance(record, dict) and isinstance(record.get("Log"), str):
            return str(record["Log"])
    return line


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def from_document(doc: dict[str, Any]) -> TesterResult:
    """Build a result from the tester's JSON document (also what the emulator's simulation emits)."""
    status = doc.get("status")
    if status not in ("pass", "fail"):
        raise NoTesterResult(f"tester result has no valid status (got {status!r})")
    gpu = doc.get("gpu") or {}
    devices = doc.get("devices") or []
    first_mm = (devices[0].get("matmul") or {}) if devices and isinstance(devices[0], dict) else {}
    pct = doc.get("pct_of_peak") or {}
    rates: dict[str, DtypeRate] = {}
    for name, value in (doc.get("tflops") or {}).items():
        tflops = _float(value)
        if name not in DTYPES or tflops is None:
            continue
        detail = first_mm.get(name) or {}
        rates[name] = DtypeRate(
            tflops, _float(pct.get(name)), detail.get("ok"), _float(detail.get("rel_err"))
        )
    per_gpu = tuple(
        {
            k: float(v["tflops"])
            for k, v in (d.get("matmul") or {}).items()
            if isinstance(v, dict) and "tflops" in v
        }
        for d in devices
        if isinstance(d, dict)
    )
    env = doc.get("env") or {}
    cudart = env.get("cudart") or {}
    allreduce = doc.get("allreduce") or {}
    return TesterResult(
        status=status,
        reason=doc.get("reason"),
        gpu_name=gpu.get("name"),
        gpu_count=int(gpu.get("count") or env.get("device_count") or 0),
        rates=rates,
        per_gpu=per_gpu,
        bandwidth_gbps={
            k: float(v) for k, v in (doc.get("bandwidth_gbps") or {}).items() if _float(v) is not None
        },
        allreduce_busbw_gbps=_float(allreduce.get("busbw_gbps")),
        cpu_gflops=_float((doc.get("cpu") or {}).get("gflops")),
        speedup=_float(doc.get("speedup")),
        gpu_elapsed_s=_float((doc.get("main") or {}).get("seconds")),
        elapsed_s=_float(doc.get("elapsed_s")),
        correct=doc.get("correct"),
        driver=env.get("driver"),
        cuda_runtime=cudart.get("runtime_version") or env.get("torch_cuda"),
        simulated=bool(doc.get("simulated", False)),
        raw=doc,
    )


def _legacy(lines: list[str]) -> TesterResult | None:
    """The seed's tester: a device line, the result matrix, then `Elapsed Time: <s> seconds`."""
    on_gpu, elapsed, cpu_seen = False, None, False
    for line in lines:
        if _GPU_RE.search(line):
            on_gpu = True
        elif _CPU_RE.search(line):
            cpu_seen = True
        match = _ELAPSED_RE.search(line)
        if match and (on_gpu or elapsed is None):
            elapsed = float(match.group(1))
    if elapsed is None:
        return None
    if on_gpu:
        return TesterResult(status="pass", gpu_count=1, gpu_elapsed_s=elapsed, legacy=True)
    reason = "no-cuda" if cpu_seen else "no-gpu-line"
    return TesterResult(status="fail", reason=reason, elapsed_s=elapsed, legacy=True)


def parse_tester_output(text: str) -> TesterResult:
    """The last ACAGPU_RESULT line wins (a retried job prints one per attempt); else the legacy format."""
    lines = [_unwrap(line) for line in text.splitlines()]
    for line in reversed(lines):
        match = _RESULT_RE.search(line)
        if not match:
            continue
        try:
            doc = json.loads(match.group(1))
        except ValueError as exc:
            raise NoTesterResult(f"the {RESULT_TAG} line is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise NoTesterResult(f"the {RESULT_TAG} line does not hold a JSON object")
        return from_document(doc)
    legacy = _legacy(lines)
    if legacy is not None:
        return legacy
    raise NoTesterResult(
        f"no {RESULT_TAG} line and no 'Elapsed Time:' line in the tester output",
        hint="the tester may have been killed before it finished; check its logs for a traceback",
    )
