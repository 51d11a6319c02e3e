"""What a parsed nvidia-smi output says, in one shape for every format (table, CSV, -q, -q -x, -L).

The parsers in nvidia_smi_table / nvidia_smi_query / nvidia_smi_csv fill these records; callers only
ever see `NvidiaSmi`. Values nvidia-smi prints as `N/A` (or `[Not Supported]`, `Not Found`...) are
None, never a guessed number. Small value readers live here so every parser reads cells the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Final

# detected formats
TABLE: Final = "table"
CSV: Final = "csv"
QUERY: Final = "query"  # nvidia-smi -q
XML: Final = "xml"  # nvidia-smi -q -x
LIST: Final = "list"  # nvidia-smi -L
ERROR: Final = "error"
UNRECOGNIZED: Final = "unrecognized"

# error kinds (the `error` key of the JSON contract)
NVML_MISMATCH: Final = "nvml_mismatch"
NO_DEVICES: Final = "no_devices"
DRIVER_NOT_LOADED: Final = "driver_not_loaded"
GPU_LOST: Final = "gpu_lost"  # "Unable to determine the device handle for GPU ...": fell off the bus
FAILURE_STATES: Final = frozenset({NVML_MISMATCH, NO_DEVICES, DRIVER_NOT_LOADED, GPU_LOST})

_UNAVAILABLE = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "not supported",
        "[not supported]",
        "not found",
        "unknown error",
        "[unknown error]",
        "requested functionality has been deprecated",
        "insufficient permissions",
        "[insufficient permissions]",
        "err!",  # the table's mark for a sensor it could not read (e.g. a GPU fallen off the bus)
    }
)


def value(text: str | None) -> str | None:
    """A printed value, or None when nvidia-smi says it is unavailable."""
    if text is None:
        return None
    text = text.strip()
    low = text.lower()
    if low in _UNAVAILABLE or low.startswith("not available"):
        return None
    return text


def _number_text(text: str | None, unit: str) -> str | None:
    raw = value(text)
    if raw is None:
        return None
    if unit and raw.lower().endswith(unit.lower()):
        raw = raw[: -len(unit)].strip()
    return raw


def int_of(text: str | None, unit: str = "") -> int | None:
    """`16130MiB`, `16130 MiB`, `47C`, `35 %` -> int; None for N/A or anything not a whole number."""
    raw = _number_text(text, unit)
    if raw is None:
        return None
    digits = raw[1:] if raw.startswith("-") else raw
    return int(raw) if digits.isdigit() and digits.isascii() else None


def float_of(text: str | None, unit: str = "") -> float | None:
    """`72.62 W` -> 72.62; None for N/A or anything not a plain decimal number."""
    raw = _number_text(text, unit)
    if raw is None or len(raw) > 40:
        return None
    body = raw[1:] if raw.startswith("-") else raw
    whole, _, frac = body.partition(".")
    return float(raw) if body.isascii() and (whole + frac).isdigit() else None


def whole_watts(text: str | None) -> int | None:
    """The table prints whole watts (`54W`); keep them ints so JSON shows what the table showed."""
    return int_of(text, "W")


def is_bus_id(token: str) -> bool:
    """PCI address as nvidia-smi prints it: `00000000:01:00.0` (R4xx+) or `0000:01:00.0` (older)."""
    head, dot, function = token.rpartition(".")
    if not dot or not function or not _hex(function):
        return False
    parts = head.split(":")
    return len(parts) == 3 and all(p and _hex(p) for p in parts) and len(parts[0]) in (4, 8)


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


def split_pci_device_id(text: str | None) -> tuple[str | None, str | None]:
    """`0x232110DE` (-q, CSV) or `232110DE` (-q -x) -> (`0x2321`, `0x10DE`): device id, vendor id."""
    raw = value(text)
    if raw is not None and raw.lower().startswith("0x"):
        raw = raw[2:]
    if raw is None or len(raw) != 8 or not _hex(raw):
        return None, None
    return "0x" + raw[:4], "0x" + raw[4:]


class _Record:
    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            item = getattr(self, f.name)
            if isinstance(item, tuple):
                item = [x.as_dict() if isinstance(x, _Record) else x for x in item]
            out[f.name] = item
        return out


@dataclass(frozen=True)
class ListedMigDevice(_Record):
    """A MIG device line of `nvidia-smi -L` (`MIG 3g.40gb Device 0: (UUID: MIG-...)`)."""

    profile: str
    device: int
    uuid: str | None


@dataclass(frozen=True)
class Gpu(_Record):
    """One physical GPU. The table shows whole numbers only; -q/-q -x/CSV give decimals for power."""

    index: int
    name: str | None = None
    name_truncated: bool = False  # the table cuts long names to `...`; use CSV/-q for the full one
    uuid: str | None = None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    memory_free_mib: int | None = None
    memory_reserved_mib: int | None = None
    gpu_util_pct: int | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    fan_speed_pct: int | None = None
    perf_state: str | None = None
    compute_mode: str | None = None
    persistence_mode: str | None = None
    driver_model: str | None = None  # Windows: WDDM / TCC / MCDM
    mig_mode: str | None = None  # "Enabled" / "Disabled" / "N/A" as printed; None when not shown
    brand: str | None = None
    architecture: str | None = None
    pci_device_id: str | None = None
    pci_vendor_id: str | None = None
    mig_devices: tuple[ListedMigDevice, ...] | None = None  # only `-L` nests MIG devices per GPU


@dataclass(frozen=True)
class Process(_Record):
    gpu: int
    pid: int
    type: str | None  # C, G, C+G, M...; None in the oldest tables that had no Type column
    name: str
    used_memory_mib: int | None
    gi: str | None = None  # GPU instance id ("N/A" unless MIG); absent before R450
    ci: str | None = None


@dataclass(frozen=True)
class MigDevice(_Record):
    gpu: int
    mig_dev: int
    gi: int | None = None
    ci: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    sm: int | None = None
    profile: str | None = None  # -L only, e.g. "3g.40gb"
    uuid: str | None = None  # -L / -q -x


@dataclass(frozen=True)
class NvidiaSmi(_Record):
    """Everything one nvidia-smi output told us. `error` is None exactly when GPUs were found."""

    format: str
    error: str | None = None
    error_message: str | None = None  # the failure line as printed, for people
    nvidia_smi_version: str | None = None
    driver_version: str | None = None  # R610+: the KMD version
    cuda_version: str | None = None  # highest CUDA the driver supports (not an installed toolkit)
    gpus: tuple[Gpu, ...] = ()
    processes: tuple[Process, ...] | None = None  # None: the output had no process list
    mig_devices: tuple[MigDevice, ...] | None = None  # None: the output had no MIG device list
    warnings: tuple[str, ...] = ()
    trailing_exit_code_line: str | None = None
    # a partial paste (a table cut after its banner, a process table or a -q section alone): what the
    # input did not hold, so a reader can say what is missing instead of refusing what is there
    missing: tuple[str, ...] = ()
    # -q / -q -x
    driver_version_raw: str | None = None
    cuda_version_raw: str | None = None
    kmd_version: str | None = None
    cuda_umd_version: str | None = None
    attached_gpus: int | None = None
    # failure states
    nvml_library_version: str | None = None
    # --query-gpu CSV
    query: str | None = None
    header: bool | None = None
    columns: tuple[str, ...] | None = None
    rows: tuple[dict[str, str], ...] | None = None

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.gpus)

    @property
    def partial(self) -> bool:
        """Some facts were read from an incomplete paste (`missing` says what it lacked)."""
        read = self.driver_version or self.cuda_version or self.gpus or self.processes is not None
        return bool(self.missing) and bool(read) and self.error in (None, UNRECOGNIZED)

    def as_dict(self) -> dict[str, Any]:
        doc = super().as_dict()
        doc["gpu_count"] = self.gpu_count
        return doc


def unrecognized(reason: str, *, fmt: str = UNRECOGNIZED, warnings: tuple[str, ...] = ()) -> NvidiaSmi:
    """Input we cannot read as nvidia-smi output: say so, never guess."""
    return NvidiaSmi(format=fmt, error=UNRECOGNIZED, error_message=reason, warnings=warnings)


_FENCE = re.compile(r"^\s*(```|~~~)[\w+.-]*\s*$")  # a Markdown code fence, with its language
_QUOTE = re.compile(r"^\s*> ?")  # a reply's quote marker


def unwrap_paste(lines: list[str]) -> list[str]:
    """The output as nvidia-smi printed it, from how people paste it: code fences dropped, a reply's
    `> ` quote and a Markdown code block's common indentation taken off every line. The formats
    are read by their layout (a `-q` log by its indentation, a table by its borders), so a prefix
    on every line made a whole paste unreadable."""
    lines = [line for line in lines if not _FENCE.match(line)]
    while (shown := [line for line in lines if line.strip()]) and all(
        line.lstrip().startswith(">") for line in shown
    ):
        lines = [_QUOTE.sub("", line, count=1) for line in lines]
    shown = [line for line in lines if line.strip()]
    if not shown:
        return lines
    margin = min(len(line) - len(line.lstrip(" \t")) for line in shown)
    return [line[margin:] if line.strip() else "" for line in lines] if margin else lines
