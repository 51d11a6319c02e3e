"""`acagpu smi`: what nvidia-smi says about the GPU, parsed.

Without `--from-file` it execs nvidia-smi in a run's CUDA explorer (live).
`--from-file PATH` (or `-` for stdin) reads a saved output offline: any form nvidia-smi prints
(table, `--query-gpu` CSV, `-q`, `-q -x`, `-L`, or its failure messages). The rendering helpers
here are shared with the live path, which prints the same summary for a run's CUDA explorer.

A saved `nvidia-smi -q` or `-q -x` also gets a health verdict per GPU (`aca_gpu/gpu/nvidia_smi_health.py`,
the XML through `nvidia_smi_health_xml.py`): ECC, retired pages, remapped rows, reset status, PCIe link,
clock event reasons.

Exit codes: 0 GPUs found, or a partial paste read (a table cut after its banner, a process table or a
`-q` section alone: every fact read, `missing` says what was not there) · 5 nvidia-smi reported a
failure state (NVML mismatch, no devices,
driver not loaded, a GPU lost from the bus), or a GPU's health is `failed` (`degraded` too with
`--strict`) · 2 input that is not nvidia-smi output, or a file that cannot be read.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, TextIO

import click

from aca_gpu import naming
from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import WAKE_TIMEOUT, run_options, start_timeout_option, waiter_for
from aca_gpu.config import Settings
from aca_gpu.errors import EXIT_BAD_INPUT, EXIT_GPU_CHECK, EXIT_OK, BadInput
from aca_gpu.gpu import nvidia_smi
from aca_gpu.gpu.nvidia_smi import NvidiaSmi
from aca_gpu.gpu.nvidia_smi_health import HealthReport, assess
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.engine.probe import explorer_smi
from aca_gpu.workflow.spend import ledger

_HINTS = {
    nvidia_smi.NVML_MISMATCH: "the NVML library nvidia-smi loaded differs from the loaded kernel driver "
    "(a driver update without a reboot, or driver libraries baked into the image)",
    nvidia_smi.NO_DEVICES: "no GPU is visible: check the workload profile and the container's GPU request",
    nvidia_smi.DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded, or not exposed to the container",
    nvidia_smi.GPU_LOST: "the GPU fell off the bus or failed (see `dmesg` for Xid 79/48): take the node "
    "out of service and reset or reseat the GPU",
}


def smi_exit_code(smi: NvidiaSmi) -> int:
    """0 when GPUs were found, 5 for a failure state nvidia-smi reported, 2 for unreadable input."""
    if smi.ok:
        return EXIT_OK
    if smi.error in nvidia_smi.FAILURE_STATES:
        return EXIT_GPU_CHECK
    return EXIT_BAD_INPUT


def smi_document(smi: NvidiaSmi, **extra: Any) -> dict[str, Any]:
    """The JSON document: the parse result plus whatever the caller adds (source, run id...).

    A failure state is the envelope's `error` object, its kind (nml_mismatch, unrecognized...) the
    error's `code`, so scripts read every command's failure the same way."""
    doc = {**smi.as_dict(), **extra}
    if smi.ok or not smi.error:
        return {"status": "ok", **doc, "error": None}
    detail = f": {smi.error_message}" if smi.error_message else ""
    error = {
        "message": f"nvidia-smi {smi.error}{detail}",
        "code": smi.error,
        "exit_code": smi_exit_code(smi),
        "hint": _HINTS.get(smi.error),
    }
    return {"status": "error", **doc, "error": error}


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "N/A"
    return f"{value:g}{unit}"


def _gpu_line(gpu: nvidia_smi.Gpu) -> str:
    parts = [f"GPU {gpu.index}", gpu.name or "(unnamed)"]
    if gpu.memory_total_mib is not None or gpu.memory_used_mib is not None:
        parts.append(f"{_num(gpu.memory_used_mib, '')} / {_num(gpu.memory_total_mib, ' MiB')}")
    if gpu.gpu_util_pct is not None:
        parts.append(f"{gpu.gpu_util_pct}% util")
    if gpu.temperature_c is not None:
        parts.append(f"{gpu.temperature_c}C")
    if gpu.power_draw_w is not None or gpu.power_limit_w is not None:
        parts.append(f"{_num(gpu.power_draw_w, 'W')} / {_num(gpu.power_limit_w, 'W')}")
    if gpu.mig_mode not in (None, "N/A"):
        parts.append(f"MIG {gpu.mig_mode}")
    if gpu.bus_id:
        parts.append(gpu.bus_id)
    return "  ".join(parts)


def render_smi_human(smi: NvidiaSmi, stream: TextIO) -> None:
    """A short summary: driver, CUDA, one line per GPU (same for offline and live)."""
    if smi.partial and not smi.error:
        _render_partial(smi, stream)
        return
    if not smi.ok:  # the failure itself is the `error:` line on stderr (smi_document's error)
        if smi.driver_version or smi.cuda_version:  # a table cut after its header still says these
            driver, cuda = smi.driver_version or "not reported", smi.cuda_version or "not reported"
            print(f"driver {driver}  CUDA {cuda} (highest the driver supports)  [{smi.format}]", file=stream)
        if smi.nvml_library_version:
            print(f"NVML library version: {smi.nvml_library_version}", file=stream)
        for warning in smi.warnings:
            print(f"warning: {warning}", file=stream)
        return
    driver = smi.driver_version or "not reported"
    # a table banner printing `CUDA Version: N/A` means libcuda could not be loaded
    cuda = smi.cuda_version or ("N/A" if smi.format == nvidia_smi.TABLE else "not reported")
    print(f"driver {driver}  CUDA {cuda} (highest the driver supports)  [{smi.format}]", file=stream)
    for gpu in smi.gpus:
        print(_gpu_line(gpu), file=stream)
    if smi.mig_devices:
        print(f"MIG devices: {len(smi.mig_devices)}", file=stream)
    if smi.processes is not None:
        print(f"processes: {len(smi.processes)}", file=stream)
    for warning in smi.warnings:
        print(f"warning: {warning}", file=stream)


def _render_partial(smi: NvidiaSmi, stream: TextIO) -> None:
    """What a partial paste holds, line by line as for a whole one, then what it lacks."""
    if smi.driver_version or smi.cuda_version:
        driver, cuda = smi.driver_version or "not reported", smi.cuda_version or "not reported"
        print(f"driver {driver}  CUDA {cuda} (highest the driver supports)  [{smi.format}]", file=stream)
    for gpu in smi.gpus:
        if gpu.name or gpu.bus_id or gpu.memory_total_mib is not None:
            print(_gpu_line(gpu), file=stream)
    for proc in smi.processes or ():
        memory = f"{proc.used_memory_mib} MiB" if proc.used_memory_mib is not None else "N/A"
        print(f"process {proc.pid} on GPU {proc.gpu}  {proc.type or '-'}  {proc.name}  {memory}", file=stream)
    if smi.processes is not None:
        print(f"processes: {len(smi.processes)}", file=stream)
    for warning in smi.warnings:
        print(f"warning: {warning}", file=stream)
    print(f"missing: {', '.join(smi.missing)}", file=stream)


def _read(path: str) -> str:
    try:
        if path == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")


def render_health(health: HealthReport, stream: TextIO) -> None:
    """One line per GPU with its verdict, then every finding that is not merely informational."""
    for gpu in health.gpus:
        unread = f"  (not read: {', '.join(gpu.unread)})" if gpu.unread else ""
        print(f"GPU {gpu.index} health: {gpu.verdict}{unread}", file=stream)
        for finding in gpu.findings:
            mark = {"failed": "FAILED", "degraded": "warning"}.get(finding.severity, "note")
            print(f"  {mark}: {finding.message}", file=stream)


def health_exit_code(health: HealthReport | None, strict: bool) -> int:
    """5 for a failed GPU (and a degraded one under --strict), else 0."""
    if health is not None and (health.failed or (strict and health.degraded)):
        return EXIT_GPU_CHECK
    return EXIT_OK


def smi_from_file(path: str, fields: str | None, output: Output, *, strict: bool = False) -> int:
    """The offline branch: parse a saved output, render it, return the exit code."""
    text = _read(path)
    smi = nvidia_smi.parse(text, fields=nvidia_smi.split_fields(fields))
    if smi.partial:  # a paste cut short: read every fact that is there, say what is missing
        smi = replace(smi, error=None, error_message=None)
    health = assess(text) if smi.ok and smi.format in (nvidia_smi.QUERY, nvidia_smi.XML) else None
    doc = smi_document(smi, health=health.as_dict() if health is not None else None)
    code = (EXIT_OK if smi.partial else smi_exit_code(smi)) or health_exit_code(health, strict)
    if code == EXIT_GPU_CHECK and smi.ok and health is not None:
        doc["status"] = "error"
        doc["error"] = {
            "message": f"GPU health {health.summary()}",
            "code": "GpuUnhealthy",
            "exit_code": code,
            "hint": "a failed GPU needs a reset or replacement before it takes work"
            if health.failed
            else "degraded counts as failed under --strict",
        }

    def human(stream: TextIO) -> None:
        render_smi_human(smi, stream)
        if health is not None:
            render_health(health, stream)

    output.emit(doc, human)
    if smi.missing:
        output.warn(f"partial nvidia-smi output: missing {', '.join(smi.missing)}")
    if health is not None and health.degraded and not strict:
        output.warn(f"GPU health {health.summary()}")
    return code


def smi_live(ref: RunRef, settings: Settings, output: Output, start_timeout: str = WAKE_TIMEOUT) -> int:
    """The live branch: nvidia-smi in the run's CUDA explorer, same summary plus the raw table."""
    cloud = open_cloud(settings)
    run = find_run(cloud, ref)
    deadline = naming.parse_ttl(start_timeout).total_seconds()
    parsed, session = explorer_smi(
        cloud, run, waiter_for(settings), start_timeout=deadline, progress=output,
        on_asleep=ledger.wake_recorder(cloud, run),  # the wake's life: the run's one spend figure
    )  # fmt: skip
    doc = smi_document(parsed, source="live", run_id=run.run_id, app=run.names.explorer, raw=session.output)

    def human(stream: TextIO) -> None:
        print(session.output.rstrip(), file=stream)
        render_smi_human(parsed, stream)

    output.emit(doc, human)
    return smi_exit_code(parsed)


@click.command()
@click.option(
    "--from-file",
    "from_file",
    metavar="PATH",
    help="Parse a saved nvidia-smi output (table, --query-gpu CSV, -q, -q -x, -L); '-' reads stdin.",
)
@click.option(
    "--fields",
    metavar="F1,F2,...",
    help="The --query-gpu field list of a headerless CSV (e.g. index,name,memory.total).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="A degraded GPU (correctable errors, pending remap, slow link, hardware slowdown) exits 5 too.",
)
@run_options
@start_timeout_option
@output_options
def smi(
    from_file: str | None,
    fields: str | None,
    strict: bool,
    output: Output,
    ref: RunRef,
    settings: Settings,
    start_timeout: str,
) -> None:
    """Show what nvidia-smi says: driver, highest supported CUDA, GPUs, and their health.

    Without --from-file it runs nvidia-smi in the run's CUDA explorer (--run-id, or the only run).
    A saved `nvidia-smi -q` or `-q -x` also gets a health verdict per GPU: healthy, degraded or failed.

    A kept run's explorer is stopped between uses: smi starts it (minutes on Azure, shown as a
    step), runs nvidia-smi, and stops it again.

    A paste cut short (a table cut after its banner, a process table or one `-q` section alone)
    is read for what it holds, and `missing` says what it lacks.

    Exit codes: 0 GPUs found or a partial paste read, 5 nvidia-smi reported a failure (NVML
    mismatch, no devices, driver not loaded) or a GPU's health is failed (degraded too with
    --strict), 2 unreadable input, 4 the explorer did not start within --start-timeout.
    """
    if from_file is None:
        code = smi_live(ref, settings, output, start_timeout)
    else:
        code = smi_from_file(from_file, fields, output, strict=strict)
    if code:
        raise SystemExit(code)
