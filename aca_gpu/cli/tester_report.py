"""`acagpu tester-report`: read saved gpu-tester output (or logs) and report the result it holds."""

from __future__ import annotations

import sys
from typing import Any

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import EXIT_GPU_CHECK, EXIT_OK, BadInput
from aca_gpu.gpu.tester_result import DTYPES, TesterResult, parse_tester_output, summary_lines
from aca_gpu.output import SCHEMA_VERSION, Output


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from exc


def burn_lines(burn: dict[str, Any]) -> list[str]:
    """The `--burn` run: errors first (silent corruption is what it looks for), then each GPU."""
    lines = [f"burn: {burn.get('seconds')} s, {burn.get('errors')} error(s)"]
    for dev in burn.get("devices") or []:
        last = (dev.get("intervals") or [{}])[-1]
        lines.append(
            f"  gpu{dev.get('index')} {dev.get('dtype')} {dev.get('tflops')} TFLOP/s, "
            f"{dev.get('checks')} checks, {dev.get('errors')} errors, "
            f"{dev.get('mismatches')} mismatches; at the end SM "
            f"{last.get('sm_clock_mhz')} MHz, {last.get('power_w')} W, {last.get('temp_max_c')} °C"
        )
    lines += [f"  {failure}" for failure in burn.get("failures") or []]
    dcgm = burn.get("dcgm") or {}
    if dcgm:
        lines.append(
            f"  dcgm diag: {'passed' if dcgm.get('passed') else 'FAILED'}"
            if dcgm.get("available")
            else f"  dcgm diag: not run ({dcgm.get('reason')})"
        )
    return lines


def _human(result: TesterResult) -> str:
    head = f"status: {result.status}" + (f" ({result.reason})" if result.reason else "")
    lines = [
        head + ("  [simulated]" if result.simulated else "") + ("  [legacy format]" if result.legacy else "")
    ]
    if result.gpu_name:
        lines.append(f"gpu: {result.gpu_name} x{result.gpu_count}  driver {result.driver or '?'}")
    for name in DTYPES:
        rate = result.rates.get(name)
        if rate is None:
            continue
        peak = f"  {rate.pct_of_peak:5.1f}% of peak" if rate.pct_of_peak is not None else ""
        check = "" if rate.ok is None else ("  ok" if rate.ok else "  WRONG RESULT")
        burst = f"  (burst {rate.burst_tflops:.1f})" if rate.burst_tflops is not None else ""
        lines.append(f"  {name:<5} {rate.tflops:9.1f} TFLOP/s{peak}{check}{burst}")
    for name, value in result.bandwidth_gbps.items():
        lines.append(f"  {name:<11} {value:9.1f} GB/s")
    if result.allreduce_busbw_gbps is not None:
        lines.append(f"  all-reduce  {result.allreduce_busbw_gbps:9.1f} GB/s bus bandwidth")
    if result.cpu_gflops is not None:
        lines.append(
            f"cpu: {result.cpu_gflops:.1f} GFLOP/s" + (f", GPU {result.speedup:g}x" if result.speedup else "")
        )
    if result.gpu_elapsed_s is not None:
        lines.append(f"main matmul: {result.gpu_elapsed_s:.6f} s per product")
    if result.elapsed_s is not None:
        lines.append(f"tester run: {result.elapsed_s:.1f} s")
    if result.burn:
        lines += burn_lines(result.burn)
    if result.cuda_init_attempts and result.cuda_init_attempts > 1:
        lines.append(
            f"CUDA start-up took {result.cuda_init_attempts} attempts ({', '.join(result.cuda_init_errors)})"
        )
    per_gpu = summary_lines(result)
    if per_gpu:
        lines.append("per GPU:")
        lines += [f"  {line}" for line in per_gpu]
        for gpu in result.gpu_telemetry:
            lines += [f"    gpu{gpu.index} {text}" for text in (*gpu.evidence, *gpu.findings)]
    elif result.telemetry_available is False and result.telemetry_note:
        lines.append(f"telemetry unavailable ({result.telemetry_note})")
    if result.health is not None:
        lines.append(f"GPU health (NVML): {result.health.summary()}")
        lines += [
            f"  {line}" for line in result.health.problems("failed") + result.health.problems("degraded")
        ]
    return "\n".join(lines)


@click.command("tester-report")
@click.option(
    "--from-file",
    "from_file",
    required=True,
    metavar="PATH",
    help="Saved tester output or job logs; - reads stdin.",
)
@output_options
def tester_report(from_file: str, output: Output) -> None:
    """Parse gpu-tester output into a result. Exit 0 pass, 5 fail, 2 no result found.

    Tester 1.2 also reads each GPU's health through NVML (ECC counts, row remapping, pages pending
    retirement, PCIe link): a failed GPU is exit 5 even when the measurements passed; a degraded one
    passes with a warning.
    """
    result = parse_tester_output(_read(from_file))
    doc = {"schema": SCHEMA_VERSION, "result": result.as_dict()}
    output.emit(doc, _human(result))
    health = result.health
    if health is not None and health.degraded:
        output.warn(f"GPU health {health.summary()}")
    failed = not result.passed or (health is not None and health.failed)
    raise SystemExit(EXIT_GPU_CHECK if failed else EXIT_OK)
