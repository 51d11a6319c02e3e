"""Parse what the gpu-tester printed into a `TesterResult`, from its own line or the seed's legacy format.

The tester prints exactly one `ACAGPU_RESULT {json}` line; logs may wrap it (ACA log-stream JSON
records with a `Log` field, or a timestamp prefix), so the line is found anywhere in a line. Output
of the seed's simple tester (`Elapsed Time: <s> seconds`) still parses, marked `legacy`: there is
no rate in it, only the one timing. No result at all raises `NoTesterResult`, never a crash.

Schema 2 (tester 1.1) adds GPU telemetry sampled during each timed loop; schema 1 lines still parse,
with `telemetry_available` None. Schema 3 (tester 1.2) takes each rate at steady state (a timed
window after a warm-up that waits for clock and power to settle) and reports the best short burst
apart (`burst_tflops`), plus the optional `--burn` stress run (`burn`). A burn with errors (a
product wrong beyond rounding, or a GPU that failed under load) fails the result, reason
`burn-errors`, whatever status the line carries; `mismatches` (products that differ from the first
one only bitwise, which another kernel or summation order explains) are reported and do not fail.
`summary_lines` renders one readable line per GPU for every summary
that shows a tester result (tester-report, up, validate), so they all say the same thing.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.nvidia_smi_health import HealthReport, judge_nvml, worst

RESULT_TAG = "ACAGPU_RESULT"
DTYPES = ("fp32", "tf32", "fp16", "bf16")
SCHEMAS = (1, 2, 3)  # what this parser knows; a newer schema still parses, its new fields ignored
VERDICTS = ("nominal", "power-capped", "thermal", "clocks-held")
# the rate a GPU line leads with: the tensor-core dtypes first, as datasheets and users quote them
_HEADLINE = ("bf16", "fp16", "tf32", "fp32")
_RESULT_RE = re.compile(rf"{RESULT_TAG}\s+(\{{.*\}})\s*$")
_ELAPSED_RE = re.compile(r"Elapsed Time:\s*([0-9.eE+-]+)\s*seconds")
_GPU_RE = re.compile(r"CUDA is available\. Running on GPU")
_CPU_RE = re.compile(r"CUDA is not available|Running on CPU")
# lines only this tester prints (its banner, its status line): a log holding one is never legacy
_OURS_RE = re.compile(r"acagpu gpu-tester \d")
_STATUS_RE = re.compile(r"^status: (pass|fail)\b(?: \(([^)]*)\))?")


class NoTesterResult(BadInput):
    """The text holds neither an ACAGPU_RESULT line nor the legacy `Elapsed Time:` line."""


@dataclass(frozen=True)
class DtypeRate:
    """One dtype's matmul figure on the first GPU."""

    tflops: float
    pct_of_peak: float | None = None
    ok: bool | None = None  # correctness against the float64 reference; None when not reported
    rel_err: float | None = None
    burst_tflops: float | None = None  # schema 3: the best short chunk, apart from the sustained rate
    window_s: float | None = None  # schema 3: the timed window the rate is averaged over
    settled: bool | None = None  # schema 3: the warm-up saw clock and power settle before the window

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuTelemetry:
    """One GPU's headline rate and what the GPU was doing while it was measured (schema 2).

    `verdict` is the tester's: nominal, power-capped, thermal or clocks-held, with its `evidence`;
    `findings` holds rates far below what the observed clock allows. Clocks, power and temperature
    are medians over the headline measurement's samples; `available` False says why in `note`.
    """

    index: int
    name: str | None = None
    available: bool = False
    note: str | None = None
    verdict: str | None = None
    evidence: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()
    dtype: str | None = None
    tflops: float | None = None
    settled: bool | None = None  # schema 3: False when the headline's warm-up hit its cap unsettled
    pct_of_peak: float | None = None
    at_clock_tflops: float | None = None
    pct_of_clock: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: int | None = None
    temp_max_c: int | None = None
    samples: int = 0
    reasons: dict[str, float] = field(default_factory=dict)  # reason -> share of samples it was on

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
    schema: int = 1
    gpu_telemetry: tuple[GpuTelemetry, ...] = ()  # one per GPU measured, telemetry or not
    telemetry_available: bool | None = None  # None: the tester predates telemetry (schema 1)
    telemetry_source: str | None = None  # "nvml", or "simulated" in the emulator
    telemetry_note: str | None = None  # why there is none
    cuda_init_attempts: int | None = None  # > 1: CUDA start-up needed a retry
    cuda_init_errors: tuple[str, ...] = ()
    result_grace_s: float | None = None  # how long the tester stays alive after its result line
    burn: dict[str, Any] | None = None  # schema 3 `--burn`: seconds, errors, per-GPU checks and telemetry
    health: HealthReport | None = None  # schema 3: NVML health readings judged like `nvidia-smi -q`
    skipped: tuple[str, ...] = ()  # what the tester left out: `gpu0:fp32:budget`, `gpu0:bf16:unsupported`
    warnings: tuple[str, ...] = ()  # tester 1.3: a budget too short for every rate at its settled length
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in asdict(self).items() if k != "raw"}
        doc["rates"] = {k: v.as_dict() for k, v in self.rates.items()}
        doc["gpu_telemetry"] = [g.as_dict() for g in self.gpu_telemetry]
        doc["health"] = self.health.as_dict() if self.health is not None else None
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


def _int(value: Any) -> int | None:
    number = _float(value)
    return round(number) if number is not None else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _gpu_telemetry(device: dict[str, Any], position: int, schema: int, top: dict[str, Any]) -> GpuTelemetry:
    """The headline rate of one device record and the telemetry measured with it."""
    matmul = _dict(device.get("matmul"))
    dtype = next((d for d in _HEADLINE if isinstance(matmul.get(d), dict)), None)
    row = _dict(matmul.get(dtype)) if dtype else {}
    tel = _dict(device.get("telemetry"))
    sample = _dict(row.get("telemetry"))
    if schema < 2:
        note: str | None = "not reported (tester 1.0)"
    elif tel.get("available"):
        note = None
    else:
        note = f"unavailable ({tel.get('reason') or top.get('reason') or 'not reported'})"
    reasons = {str(k): float(v) for k, v in _dict(sample.get("reasons")).items() if _float(v) is not None}
    index = _int(device.get("index"))
    return GpuTelemetry(
        index=index if index is not None else position,
        name=device.get("name") if isinstance(device.get("name"), str) else None,
        available=bool(tel.get("available")),
        note=note,
        verdict=tel.get("verdict") if tel.get("verdict") in VERDICTS else None,
        evidence=_texts(tel.get("evidence")),
        findings=_texts(tel.get("findings")),
        dtype=dtype,
        tflops=_float(row.get("tflops")),
        settled=row.get("settled") if isinstance(row.get("settled"), bool) else None,
        pct_of_peak=_float(row.get("pct_of_peak")),
        at_clock_tflops=_float(row.get("at_clock_tflops")),
        pct_of_clock=_float(row.get("pct_of_clock")),
        sm_clock_mhz=_int(sample.get("sm_clock_mhz")),
        sm_clock_max_mhz=_int(tel.get("sm_clock_max_mhz")),
        mem_clock_mhz=_int(sample.get("mem_clock_mhz")),
        power_w=_float(sample.get("power_w")),
        power_limit_w=_float(tel.get("power_limit_w")),
        temp_c=_int(sample.get("temp_c")),
        temp_max_c=_int(sample.get("temp_max_c")),
        samples=_int(sample.get("samples")) or 0,
        reasons=reasons,
    )


def _health(devices: list[Any]) -> HealthReport | None:
    """Every device's NVML health readings (tester 1.2), judged; None when the tester read none."""
    judged = []
    for position, device in enumerate(d for d in devices if isinstance(d, dict)):
        readings = _dict(_dict(device.get("telemetry")).get("health"))
        if readings:
            index = _int(device.get("index"))
            name = device.get("name") if isinstance(device.get("name"), str) else None
            judged.append(judge_nvml(index if index is not None else position, name, readings))
    if not judged:
        return None
    return HealthReport(worst([g.verdict for g in judged]), tuple(judged))


def burn_errors(burn: dict[str, Any]) -> int:
    """Errors of a `--burn` run: the tester's total, or what its GPUs' errors and failures add up
    to when that is more (a total that disagrees with its parts is not the one trusted)."""
    devices = [d for d in burn.get("devices") or [] if isinstance(d, dict)]
    failures = burn.get("failures")
    parts = sum(_int(d.get("errors")) or 0 for d in devices) + (
        len(failures) if isinstance(failures, list) else 0
    )
    return max(_int(burn.get("errors")) or 0, parts)


def _verdict(doc: dict[str, Any], burn: dict[str, Any] | None) -> tuple[str, Any]:
    """(status, reason): the tester's own, except that burn errors always fail (reason burn-errors,
    unless the tester already failed for another reason)."""
    status, reason = doc.get("status"), doc.get("reason")
    if status not in ("pass", "fail"):
        raise NoTesterResult(f"tester result has no valid status (got {status!r})")
    if burn is not None and burn_errors(burn):
        return "fail", reason if status == "fail" and reason else "burn-errors"
    return status, reason


def from_document(doc: dict[str, Any]) -> TesterResult:
    """Build a result from the tester's JSON document (also what the emulator's simulation emits)."""
    burn = _dict(doc.get("burn")) or None
    status, reason = _verdict(doc, burn)
    gpu = _dict(doc.get("gpu"))
    listed = doc.get("devices")
    devices: list[Any] = listed if isinstance(listed, list) else []
    first_mm = _dict(devices[0].get("matmul")) if devices and isinstance(devices[0], dict) else {}
    pct = _dict(doc.get("pct_of_peak"))
    rates: dict[str, DtypeRate] = {}
    for name, value in _dict(doc.get("tflops")).items():
        tflops = _float(value)
        if name not in DTYPES or tflops is None:
            continue
        detail = _dict(first_mm.get(name))
        settled = detail.get("settled")
        rates[name] = DtypeRate(
            tflops,
            _float(pct.get(name)),
            detail.get("ok"),
            _float(detail.get("rel_err")),
            burst_tflops=_float(detail.get("burst_tflops")),
            window_s=_float(detail.get("window_s")),
            settled=settled if isinstance(settled, bool) else None,
        )
    per_gpu = tuple(
        {
            k: rate
            for k, v in _dict(d.get("matmul")).items()
            if isinstance(v, dict) and (rate := _float(v.get("tflops"))) is not None
        }
        for d in devices
        if isinstance(d, dict)
    )
    env = _dict(doc.get("env"))
    cudart = _dict(env.get("cudart"))
    allreduce = _dict(doc.get("allreduce"))
    schema = _int(doc.get("schema")) or 1
    top = _dict(doc.get("telemetry"))
    init = _dict(env.get("cuda_init"))
    gpu_telemetry = tuple(
        _gpu_telemetry(d, i, schema, top) for i, d in enumerate(devices) if isinstance(d, dict)
    )
    return TesterResult(
        status=status,
        reason=reason,
        gpu_name=gpu.get("name"),
        gpu_count=int(gpu.get("count") or env.get("device_count") or 0),
        rates=rates,
        per_gpu=per_gpu,
        bandwidth_gbps={
            k: float(v) for k, v in _dict(doc.get("bandwidth_gbps")).items() if _float(v) is not None
        },
        allreduce_busbw_gbps=_float(allreduce.get("busbw_gbps")),
        cpu_gflops=_float(_dict(doc.get("cpu")).get("gflops")),
        speedup=_float(doc.get("speedup")),
        gpu_elapsed_s=_float(_dict(doc.get("main")).get("seconds")),
        elapsed_s=_float(doc.get("elapsed_s")),
        correct=doc.get("correct"),
        driver=env.get("driver"),
        cuda_runtime=cudart.get("runtime_version") or env.get("torch_cuda"),
        simulated=bool(doc.get("simulated", False)),
        schema=schema,
        gpu_telemetry=gpu_telemetry,
        telemetry_available=bool(top.get("available")) if schema >= 2 else None,
        telemetry_source=top.get("source") if isinstance(top.get("source"), str) else None,
        telemetry_note=str(top["reason"]) if top.get("reason") else None,
        cuda_init_attempts=_int(init.get("attempts")) if init else None,
        cuda_init_errors=_texts(init.get("errors")),
        result_grace_s=_float(doc.get("result_grace_s")),
        burn=burn,
        health=_health(devices),
        skipped=_texts(doc.get("skipped")),
        warnings=_texts(doc.get("warnings")),
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


def _cut_log(lines: list[str]) -> TesterResult:
    """This tester's log without its result line (cut, or killed): only a status line saying fail is
    evidence (the tester's own verdict); anything else has no result, whatever the timings say."""
    status = next((m for line in reversed(lines) if (m := _STATUS_RE.search(line))), None)
    if status is not None and status.group(1) == "fail":
        why = f"{status.group(2)}; " if status.group(2) else ""
        return TesterResult(status="fail", reason=f"{why}the log is cut before the {RESULT_TAG} result line")
    said = f" (its status line says {status.group(1)})" if status is not None else ""
    raise NoTesterResult(
        f"the tester's log is cut before its {RESULT_TAG} result line{said}: no result to judge",
        hint="read the whole log (`acagpu logs --tester`), or run the tester again",
    )


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
    if any(_OURS_RE.search(line) or _STATUS_RE.search(line) for line in lines):
        return _cut_log(lines)
    legacy = _legacy(lines)
    if legacy is not None:
        return legacy
    raise NoTesterResult(
        f"no {RESULT_TAG} line and no 'Elapsed Time:' line in the tester output",
        hint="the tester may have been killed before it finished; check its logs for a traceback",
    )


def _gpu_line(g: GpuTelemetry, simulated: bool) -> str:
    text = f"gpu{g.index}" + (f" {g.name}" if g.name else "") + ":"
    if g.dtype and g.tflops is not None:
        context = [f"{g.pct_of_peak:g}% of peak"] if g.pct_of_peak is not None else []
        if g.pct_of_clock is not None and g.at_clock_tflops is not None and g.sm_clock_mhz:
            context.append(f"{g.pct_of_clock:.0f}% of {g.at_clock_tflops:.0f} at {g.sm_clock_mhz} MHz")
        if g.settled is False:  # its warm-up hit its cap: the figure may still be moving
            context.insert(0, "not settled")
        text += f" {g.dtype} {g.tflops:.1f} TFLOP/s" + (f" ({', '.join(context)})" if context else "") + ";"
    if not g.available:
        return text + f" telemetry {g.note or 'unavailable'}" + (" [simulated]" if simulated else "")
    state: list[str] = []
    if g.sm_clock_mhz is not None:
        state.append(
            f"SM {g.sm_clock_mhz}" + (f"/{g.sm_clock_max_mhz}" if g.sm_clock_max_mhz else "") + " MHz"
        )
    if g.power_w is not None:
        state.append(f"{g.power_w:.0f}" + (f"/{g.power_limit_w:.0f}" if g.power_limit_w else "") + " W")
    if g.temp_c is not None:
        state.append(f"{g.temp_c} °C")
    state += [f"{name} {share:.0%}" for name, share in g.reasons.items() if name != "idle" and share > 0]
    text += f" {g.verdict or 'no verdict'}" + (f": {', '.join(state)}" if state else "")
    if g.findings:
        text += "; rate far below what its clock allows"
    return text + (" [simulated]" if simulated else "")


def _not_measured(skipped: tuple[str, ...]) -> list[str]:
    """`gpu0 not measured: fp32, tf32 (the tester's budget ran out)`: what a budget left out, per
    GPU, so a rate missing from a summary is never a silent gap (a dtype the GPU lacks is not listed:
    bf16 on a T4 is no omission)."""
    by_gpu: dict[str, list[str]] = {}
    for item in skipped:
        parts = item.split(":")
        if len(parts) == 3 and parts[2] == "budget":
            by_gpu.setdefault(parts[0], []).append(parts[1])
        elif len(parts) == 2 and parts[1] == "budget":  # `allreduce:budget`
            by_gpu.setdefault("all GPUs", []).append(parts[0])
    return [
        f"{where} not measured: {', '.join(names)} (the tester's budget ran out)"
        for where, names in by_gpu.items()
    ]


def summary_lines(result: TesterResult) -> list[str]:
    """One readable line per GPU measured: headline rate, % of peak and of what its clock allows, the
    verdict with clocks, power, temperature and active reasons; then what the tester's budget left
    out. Empty when no GPU was measured; a run without telemetry says so on each GPU's line. Pure:
    renderers print these as they are.
    """
    lines = [_gpu_line(g, result.simulated) for g in result.gpu_telemetry]
    return lines + _not_measured(result.skipped) if lines else lines
