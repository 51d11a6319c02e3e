"""`acagpu doctor`: diagnose this GPU container host, or a pasted log, one finding per line."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import BadInput
from aca_gpu.output import Output
from aca_gpu.workflow.doctor import DoctorReport, Finding

_GLYPH = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "-"}
DEFAULT_CDI_PATH = "/etc/cdi/acagpu-nvidia.json"


def render_finding(finding: Finding) -> str:
    line = f"{_GLYPH.get(finding.status, '?')} {finding.check}: {finding.message}"
    return line + (f" — fix: {finding.fix}" if finding.fix and finding.status in ("fail", "warn") else "")


def render(report: DoctorReport, stream: TextIO) -> None:
    for finding in report.findings:
        print(render_finding(finding), file=stream)


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


@click.command()
@click.option(
    "--from-file",
    "from_file",
    metavar="LOG",
    help="Diagnose a saved log (a failed docker/podman/apptainer run, nvidia-smi output); '-' reads stdin.",
)
@click.option(
    "--write-cdi",
    is_flag=True,
    help="Also write a CDI spec for Podman made from this host's /dev/nvidia* and driver libraries.",
)
@click.option(
    "--cdi-path",
    default=DEFAULT_CDI_PATH,
    show_default=True,
    metavar="PATH",
    help="Where --write-cdi writes the spec (.json).",
)
@output_options
def doctor(output: Output, from_file: str | None, write_cdi: bool, cdi_path: str) -> None:
    """Diagnose this GPU container host (driver, Docker, Podman, Apptainer) and say how to fix it.

    With --from-file it diagnoses a pasted log instead: the NVIDIA Container Toolkit missing, an
    image's CUDA requirement newer than the driver, NVML driver/library mismatch, Apptainer without
    --nv, no CUDA-capable device, no CDI spec. Exit codes: 0 nothing wrong (warnings allowed),
    5 a GPU/driver finding, 2 bad input.
    """
    from aca_gpu.workflow import doctor as workflow

    if from_file is not None and write_cdi:
        raise click.UsageError("--write-cdi describes this host; it cannot be combined with --from-file")
    if from_file is not None:
        report = workflow.diagnose_text(_read(from_file), from_file)
    else:
        report = workflow.DoctorReport("host")
        if write_cdi:  # first, so the Podman check judges the spec just written
            workflow.write_cdi(report, cdi_path)
        workflow.diagnose_host(report)
    output.emit(report.document(), lambda stream: render(report, stream))
    if report.exit_code:
        raise SystemExit(report.exit_code)
