"""Read whatever `nvidia-smi` printed: `parse(text, fields=None) -> NvidiaSmi`.

One entry point for every form a user or the CUDA explorer produces: the default table (any driver
branch), `--query-gpu` CSV, `-q`, `-q -x`, `-L`, and the failure states nvidia-smi prints instead
of a table. Input that is none of these comes back as `error="unrecognized"`: the parser never
raises on bad input and never guesses a value it did not read.

Formats are told apart by markers that only they have (XML root, `NVSMI LOG`, the `NVIDIA-SMI ...
Driver Version:` banner, `GPU n: ... (UUID: ...)`, a CSV header). Everything here is linear in the
input size: line scans and string methods, no backtracking regular expressions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aca_gpu.gpu.nvidia_smi_csv import is_list_line as _is_list_line
from aca_gpu.gpu.nvidia_smi_csv import looks_like_csv, looks_like_header, parse_csv, parse_list
from aca_gpu.gpu.nvidia_smi_model import (
    CSV,
    DRIVER_NOT_LOADED,
    ERROR,
    FAILURE_STATES,
    GPU_LOST,
    LIST,
    NO_DEVICES,
    NVML_MISMATCH,
    QUERY,
    TABLE,
    UNRECOGNIZED,
    XML,
    Gpu,
    ListedMigDevice,
    MigDevice,
    NvidiaSmi,
    Process,
    unrecognized,
    unwrap_paste,
)
from aca_gpu.gpu.nvidia_smi_query import fragment_sections, parse_query, parse_xml
from aca_gpu.gpu.nvidia_smi_table import is_banner, is_process_title, parse_table

__all__ = [
    "CSV",
    "DRIVER_NOT_LOADED",
    "ERROR",
    "FAILURE_STATES",
    "GPU_LOST",
    "LIST",
    "NO_DEVICES",
    "NVML_MISMATCH",
    "QUERY",
    "TABLE",
    "UNRECOGNIZED",
    "XML",
    "Gpu",
    "ListedMigDevice",
    "MigDevice",
    "NvidiaSmi",
    "Process",
    "parse",
    "split_fields",
]

# CSI escape sequences a terminal-attached exec may leave in the text; no nested quantifiers
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# failure texts (exact phrases nvidia-smi prints) -> error kind
_FAILURES = (
    ("Driver/library version mismatch", NVML_MISMATCH),
    ("No devices were found", NO_DEVICES),
    ("couldn't communicate with the NVIDIA driver", DRIVER_NOT_LOADED),
    # a GPU that fell off the bus (Xid 79) or failed: NVML cannot get a handle for it
    ("Unable to determine the device handle for GPU", GPU_LOST),
    ("Unable to detect the device handle for GPU", GPU_LOST),
)


def split_fields(fields: str | Sequence[str] | None) -> list[str] | None:
    """`index,name, memory.total` -> ["index", "name", "memory.total"]."""
    if fields is None:
        return None
    items = fields.split(",") if isinstance(fields, str) else list(fields)
    cleaned = [f.strip() for f in items if f.strip()]
    return cleaned or None


def _normalise(text: str) -> list[str]:
    text = text.lstrip("\ufeff")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return unwrap_paste(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def _failure(lines: Sequence[str]) -> NvidiaSmi | None:
    """The failure states nvidia-smi prints instead of output; None when there is none."""
    kind: str | None = None
    message: str | None = None
    nvml_version: str | None = None
    for line in lines:
        text = line.strip()
        if text.startswith("NVML library version:"):
            nvml_version = text.partition(":")[2].strip() or None
        if kind is not None:
            continue
        found = next((k for phrase, k in _FAILURES if phrase in text), None)
        if found is not None:
            kind, message = found, text
        elif text.startswith("Failed to initialize NVML") and message is None:
            message = text  # another NVML failure (e.g. "Unknown Error"): reported, not classified
    if kind is None and message is None:
        return None
    return NvidiaSmi(
        format=ERROR,
        error=kind or UNRECOGNIZED,
        error_message=message,
        nvml_library_version=nvml_version,
    )


def _structured(lines: Sequence[str]) -> NvidiaSmi | None:
    """Formats with an unmistakable marker: XML, -q, the table."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("<"):
        return parse_xml("\n".join(lines))
    if any("NVSMI LOG" in line or line.startswith("Attached GPUs ") for line in lines):
        return parse_query(lines)
    if any(is_banner(line) for line in lines) or any(is_process_title(line) for line in lines):
        return parse_table(lines)  # (a process table pasted alone has no banner)
    if fragment_sections(lines) is not None:
        return parse_query(lines)  # one GPU's -q section pasted alone (ECC errors, clock reasons...)
    return None


def parse(text: str, fields: str | Sequence[str] | None = None) -> NvidiaSmi:
    """Parse one nvidia-smi output. `fields`: the `--query-gpu=` list of a headerless CSV."""
    lines = _normalise(text)
    if not any(line.strip() for line in lines):
        return unrecognized("empty input")
    structured = _structured(lines)
    if structured is not None and structured.ok:
        return structured
    failure = _failure(lines)
    if failure is not None:
        return failure
    if structured is not None:
        return structured
    content = [line for line in lines if line.strip()]
    if any(_is_list_line(line) for line in content):
        return parse_list(content)
    field_list = split_fields(fields)
    if field_list is not None or looks_like_header(content[0].strip()) or looks_like_csv(content):
        return parse_csv(content, field_list)
    return unrecognized("not nvidia-smi output (no table banner, -q/-x log, -L list or CSV found)")
