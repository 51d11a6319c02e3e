"""`acagpu doctor`: diagnose this GPU container host, or a pasted log, one finding per line."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import BadInput
from aca_gpu.output import Output
from aca_gpu.workflow.local.doctor import DoctorReport, Finding

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
    return log_text(data, path)


BINARY_SHARE = 0.1  # undecodable or control characters, beyond which input is not a log
_TEXT_CONTROLS = frozenset("\t\n\r\f\b\x1b")  # what terminals and tools put in logs


def log_text(data: bytes, path: str) -> str:
    """A log's text: UTF-8 (a stray bad byte is replaced), or UTF-16 with its BOM (PowerShell's `>`).

    Anything else is refused (exit 2): read as text, random bytes match no known failure and the
    verdict would be "nothing wrong" about a file that was never a log."""
    utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
    text = data.decode("utf-16" if utf16 else "utf-8", errors="replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in _TEXT_CONTROLS))
    if odd > BINARY_SHARE * len(text):
        raise BadInput(
            f"{path} is not a text log ({odd} of {len(text)} characters are binary)",
            hint="pass the saved output of the failed command (docker/podman/apptainer run, nvidia-smi)",
        )
    return text


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
    from aca_gpu.workflow.local import doctor as workflow

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
