"""nvidia-smi as an emulated container sees it: the default table, --query-gpu CSV, -L and -q.

The table follows the real layout of the driver branch it claims to be (widths, borders and quirks
checked line by line against real outputs), so the tool's parser meets exactly what a real host prints.
Branches: R535 (89 columns), R545-R575 (91 columns; R570 widens the process PID column) and R580+
(91 columns, `+---` under the banner, empty separator line). Older drivers use the R535 layout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aca_gpu.emulator.workloads.cuda_versions import driver_major, max_cuda_for_driver
from aca_gpu.emulator.workloads.smi_health import health_sections

CONFIG_ENV = "ACAGPU_EMULATOR_SMI_CONFIG"

# nvidia-smi's documented exit codes (man page): 2 invalid argument, 6 object not found.
EXIT_INVALID_ARGUMENT = 2
EXIT_NOT_FOUND = 6


@dataclass(frozen=True)
class SmiGpu:
    """One GPU as NVML would report it."""

    index: int
    name: str
    uuid: str
    bus_id: str  # domain:bus:device.function, e.g. 00000001:00:00.0 on Azure (Hyper-V PCI domains)
    memory_total_mib: int
    compute_cap: str
    architecture: str
    power_limit_w: int
    power_draw_w: float
    device_id: str  # PCI device id + vendor, e.g. 0x1EB810DE
    brand: str = "NVIDIA"
    memory_used_mib: int = 0
    memory_reserved_mib: int = 0
    temperature_c: int = 30
    fan: str = "N/A"
    pstate: str = "P0"
    persistence: bool = True
    ecc_errors: str = "0"
    mig_mode: str = "N/A"  # "Disabled" on MIG-capable parts (A100), "N/A" elsewhere (T4)
    compute_mode: str = "Default"
    util_pct: int = 0
    util_memory_pct: int = 0
    clock_sm_mhz: int = 1410
    clock_max_sm_mhz: int = 1410
    clock_mem_mhz: int = 1512
    clock_max_mem_mhz: int = 1512
    # health, as `nvidia-smi -q` prints it (a `gpu` fault changes these)
    ecc_volatile_corrected: int = 0
    ecc_volatile_uncorrected: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    remapped_uncorrectable: int = 0
    pcie_gen_max: int = 4
    pcie_gen: int = 4
    pcie_width_max: int = 16
    pcie_width: int = 16
    clock_reasons: tuple[str, ...] = ()  # printed names: "HW Slowdown", "HW Thermal Slowdown", ...
    pages_pending: bool = False  # pre-Ampere parts: Pending Page Blacklist

    @property
    def memory_free_mib(self) -> int:
        return self.memory_total_mib - self.memory_reserved_mib - self.memory_used_mib


@dataclass(frozen=True)
class SmiProcess:
    gpu: int
    pid: int
    type: str  # "C", "G" or "C+G"
    name: str
    used_memory_mib: int


@dataclass(frozen=True)
class SmiHost:
    """Everything nvidia-smi prints: the driver, its CUDA level and the GPUs the container sees."""

    driver_version: str
    gpus: tuple[SmiGpu, ...]
    processes: tuple[SmiProcess, ...] = ()
    cuda_version: str | None = field(default=None)

    @property
    def cuda(self) -> str | None:
        return self.cuda_version or max_cuda_for_driver(self.driver_version)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> SmiHost:
        raw = json.loads(text)
        return cls(
            driver_version=raw["driver_version"],
            gpus=tuple(
                SmiGpu(**{**g, "clock_reasons": tuple(g.get("clock_reasons", ()))}) for g in raw["gpus"]
            ),
            processes=tuple(SmiProcess(**p) for p in raw.get("processes", ())),
            cuda_version=raw.get("cuda_version"),
        )


class SmiUsageError(Exception):
    """Bad command line: nvidia-smi prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.code = code


# --- default table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    width: int  # characters per table line
    bus_col: int  # inner width of the Bus-Id / Memory-Usage column
    driver_field: int  # width of the driver version field in the banner
    pid_width: int  # process table PID column
    under_banner: str  # first character of the line under the banner
    gap_line: str  # the line between the GPU table and the process table


_R535 = _Layout(width=89, bus_col=22, driver_field=13, pid_width=10, under_banner="|", gap_line=" " * 89)
_R550 = _Layout(width=91, bus_col=24, driver_field=15, pid_width=10, under_banner="|", gap_line=" " * 89)
_R570 = _Layout(width=91, bus_col=24, driver_field=15, pid_width=16, under_banner="|", gap_line=" " * 89)
_R580 = _Layout(width=91, bus_col=24, driver_field=15, pid_width=16, under_banner="+", gap_line="")


def _layout(driver_version: str) -> _Layout:
    major = driver_major(driver_version)
    if major >= 580:
        return _R580
    if major >= 570:
        return _R570
    if major >= 545:
        return _R550
    return _R535


def _truncate(text: str, width: int, *, left: bool = False) -> str:
    if len(text) <= width:
        return text
    return "..." + text[len(text) - width + 3 :] if left else text[: width - 3] + "..."


def timestamp(now: float | None = None) -> str:
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(now))


def render_table(host: SmiHost, *, now: float | None = None) -> str:
    lay = _layout(host.driver_version)
    w, c2 = lay.width, lay.bus_col
    c1, c3 = 41, 22
    rule = "+" + "-" * c1 + "+" + "-" * c2 + "+" + "-" * c3 + "+"
    cuda = host.cuda or "N/A"
    banner = (
        f"| NVIDIA-SMI {host.driver_version:<23}Driver Version: {host.driver_version:<{lay.driver_field}}"
        f"CUDA Version: {cuda:<9}|"
    )
    lines = [
        f"{timestamp(now)}       ",
        "+" + "-" * (w - 2) + "+",
        banner,
        lay.under_banner + rule[1:],
        f"| GPU  Name                 Persistence-M | Bus-Id{'Disp.A':>{c2 - 8}} | Volatile Uncorr. ECC |",
        f"| Fan  Temp   Perf          Pwr:Usage/Cap |{'Memory-Usage':>{c2 - 1}} | GPU-Util  Compute M. |",
        f"|{'':{c1}}|{'':{c2}}|{'MIG M.':>{c3 - 1}} |",
        "|" + "=" * c1 + "+" + "=" * c2 + "+" + "=" * c3 + "|",
    ]
    for gpu in host.gpus:
        lines.extend(_gpu_rows(gpu, lay))
        lines.append(rule)
    lines.append(lay.gap_line)
    lines.extend(_process_table(host, lay))
    return "\n".join(lines) + "\n"


def _gpu_rows(gpu: SmiGpu, lay: _Layout) -> list[str]:
    pm = "On" if gpu.persistence else "Off"
    name = _truncate(gpu.name, 27)
    bus_pad = " " * (lay.bus_col - 21)
    if lay.bus_col == 22:
        power = f"{round(gpu.power_draw_w):>16}W / {gpu.power_limit_w:>3}W"
        memory = f"{gpu.memory_used_mib:>7}MiB / {gpu.memory_total_mib:>5}MiB"
    else:
        power = f"{round(gpu.power_draw_w):>15}W / {gpu.power_limit_w:>4}W"
        memory = f"{gpu.memory_used_mib:>8}MiB / {gpu.memory_total_mib:>6}MiB"
    row1 = f"| {gpu.index:>3}  {name:<27}    {pm:<3} |{bus_pad}{gpu.bus_id} Off | {gpu.ecc_errors:>20} |"
    row2 = (
        f"| {gpu.fan:>3}   {gpu.temperature_c:>2}C    {gpu.pstate:<2}{power} |"
        f"{memory:>{lay.bus_col - 1}} | {gpu.util_pct:>6}%      {gpu.compute_mode:<7} |"
    )
    row3 = f"|{'':41}|{'':{lay.bus_col}}|{gpu.mig_mode:>21} |"
    return [row1, row2, row3]


def _process_table(host: SmiHost, lay: _Layout) -> list[str]:
    w = lay.width
    inner = w - 2
    head1 = f"  GPU   GI   CI{'PID':>{lay.pid_width + 1}}   Type   Process name"
    head2 = "        ID   ID"
    lines = [
        "+" + "-" * inner + "+",
        "|" + " Processes:".ljust(inner) + "|",
        "|" + head1 + "GPU Memory |".rjust(inner + 1 - len(head1)),
        "|" + head2 + "Usage      |".rjust(inner + 1 - len(head2)),
        "|" + "=" * inner + "|",
    ]
    if not host.processes:
        lines.append("|" + "  No running processes found".ljust(inner) + "|")
    for proc in host.processes:
        left = f"{proc.gpu:>5}   N/A  N/A{proc.pid:>{lay.pid_width}}{proc.type:>7}   "
        right = f"{proc.used_memory_mib}MiB |"
        name_width = inner + 1 - len(left) - 10
        name = _truncate(proc.name, name_width, left=True)
        lines.append("|" + left + name.ljust(name_width) + right.rjust(10))
    lines.append("+" + "-" * inner + "+")
    return lines


# --- --query-gpu CSV ------------------------------------------------------------------------------

# field -> (unit shown in the header and after values, or ""); aliases map to their canonical field.
_FIELD_UNITS: dict[str, str] = {
    "index": "",
    "name": "",
    "uuid": "",
    "driver_version": "",
    "count": "",
    "pci.bus_id": "",
    "pci.device_id": "",
    "memory.total": "MiB",
    "memory.used": "MiB",
    "memory.free": "MiB",
    "memory.reserved": "MiB",
    "utilization.gpu": "%",
    "utilization.memory": "%",
    "temperature.gpu": "",
    "power.draw": "W",
    "power.limit": "W",
    "enforced.power.limit": "W",
    "compute_cap": "",
    "mig.mode.current": "",
    "mig.mode.pending": "",
    "pstate": "",
    "persistence_mode": "",
    "compute_mode": "",
    "fan.speed": "%",
    "clocks.sm": "MHz",
    "clocks.mem": "MHz",
    "clocks.max.sm": "MHz",
    "clocks.max.mem": "MHz",
}
_ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "memory.reserved": "memory.reserved",
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.max.memory": "clocks.max.mem",
    "power.draw.instant": "power.draw",
    "power.draw.average": "power.draw",
}


def _value(field_name: str, gpu: SmiGpu, host: SmiHost) -> str:
    na = "[N/A]"
    values: dict[str, str] = {
        "index": str(gpu.index),
        "name": gpu.name,
        "uuid": gpu.uuid,
        "driver_version": host.driver_version,
        "count": str(len(host.gpus)),
        "pci.bus_id": gpu.bus_id,
        "pci.device_id": gpu.device_id,
        "memory.total": str(gpu.memory_total_mib),
        "memory.used": str(gpu.memory_used_mib),
        "memory.free": str(gpu.memory_free_mib),
        "memory.reserved": str(gpu.memory_reserved_mib),
        "utilization.gpu": str(gpu.util_pct),
        "utilization.memory": str(gpu.util_memory_pct),
        "temperature.gpu": str(gpu.temperature_c),
        "power.draw": f"{gpu.power_draw_w:.2f}",
        "power.limit": f"{gpu.power_limit_w:.2f}",
        "enforced.power.limit": f"{gpu.power_limit_w:.2f}",
        "compute_cap": gpu.compute_cap,
        "mig.mode.current": na if gpu.mig_mode == "N/A" else gpu.mig_mode,
        "mig.mode.pending": na if gpu.mig_mode == "N/A" else gpu.mig_mode,
        "pstate": gpu.pstate,
        "persistence_mode": "Enabled" if gpu.persistence else "Disabled",
        "compute_mode": gpu.compute_mode,
        "fan.speed": na if gpu.fan == "N/A" else gpu.fan.rstrip("%"),
        "clocks.sm": str(gpu.clock_sm_mhz),
        "clocks.mem": str(gpu.clock_mem_mhz),
        "clocks.max.sm": str(gpu.clock_max_sm_mhz),
        "clocks.max.mem": str(gpu.clock_max_mem_mhz),
    }
    return values[field_name]


def render_csv(host: SmiHost, fields: list[str], *, header: bool = True, units: bool = True) -> str:
    canonical: list[str] = []
    for raw in fields:
        name = _ALIASES.get(raw, raw)
        if name not in _FIELD_UNITS:
            raise SmiUsageError(f'Field "{raw}" is not a valid field to query.\n')
        canonical.append(name)
    lines: list[str] = []
    if header:
        cells = [
            f"{raw} [{_FIELD_UNITS[c]}]" if _FIELD_UNITS[c] else raw
            for raw, c in zip(fields, canonical, strict=True)
        ]
        lines.append(", ".join(cells))
    for gpu in host.gpus:
        cells = []
        for c in canonical:
            value = _value(c, gpu, host)
            unit = _FIELD_UNITS[c]
            cells.append(f"{value} {unit}" if units and unit and not value.startswith("[") else value)
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


# --- -L and -q ------------------------------------------------------------------------------------


def render_list(host: SmiHost) -> str:
    return "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in host.gpus)


def _kv(indent: int, key: str, value: object | None = None, *, width: int = 42) -> str:
    pad = " " * (4 * indent)
    if value is None:
        return f"{pad}{key}"
    return f"{pad}{key:<{width - len(pad)}}: {value}"


def render_query(host: SmiHost, *, now: float | None = None) -> str:
    # R580 widened the key column to 55 and split power draw into average/instantaneous (seen on a
    # real 580.159.04 host); earlier R5xx print 42-wide keys and one "Power Draw".
    wide = driver_major(host.driver_version) >= 580
    width = 55 if wide else 42

    def kv(indent: int, key: str, value: object | None = None) -> str:
        return _kv(indent, key, value, width=width)

    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        kv(0, "Timestamp", timestamp(now)),
        kv(0, "Driver Version", host.driver_version),
        kv(0, "CUDA Version", host.cuda or "Not Found"),
        "",
        kv(0, "Attached GPUs", len(host.gpus)),
    ]
    for g in host.gpus:
        domain, bus, rest = g.bus_id.split(":")
        health = health_sections(g, host.driver_version, kv)
        lines += [
            f"GPU {g.bus_id}",
            kv(1, "Product Name", g.name),
            kv(1, "Product Brand", g.brand),
            kv(1, "Product Architecture", g.architecture),
            kv(1, "Persistence Mode", "Enabled" if g.persistence else "Disabled"),
            kv(1, "MIG Mode"),
            kv(2, "Current", g.mig_mode),
            kv(2, "Pending", g.mig_mode),
            kv(1, "GPU UUID", g.uuid),
            kv(1, "Minor Number", g.index),
            *health["reset"],
            kv(1, "PCI"),
            kv(2, "Bus", f"0x{bus}"),
            kv(2, "Device", f"0x{rest.split('.')[0]}"),
            kv(2, "Domain", f"0x{domain[-4:]}"),
            kv(2, "Device Id", g.device_id),
            kv(2, "Bus Id", g.bus_id),
            *health["link"],
            kv(1, "Fan Speed", g.fan),
            kv(1, "Performance State", g.pstate),
            *health["reasons"],
            kv(1, "FB Memory Usage"),
            kv(2, "Total", f"{g.memory_total_mib} MiB"),
            kv(2, "Reserved", f"{g.memory_reserved_mib} MiB"),
            kv(2, "Used", f"{g.memory_used_mib} MiB"),
            kv(2, "Free", f"{g.memory_free_mib} MiB"),
            kv(1, "Compute Mode", g.compute_mode),
            kv(1, "Utilization"),
            kv(2, "Gpu", f"{g.util_pct} %"),
            kv(2, "Memory", f"{g.util_memory_pct} %"),
            *health["ecc"],
            kv(1, "Temperature"),
            kv(2, "GPU Current Temp", f"{g.temperature_c} C"),
            kv(1, "GPU Power Readings"),
            *(
                [
                    kv(2, "Average Power Draw", f"{g.power_draw_w:.2f} W"),
                    kv(2, "Instantaneous Power Draw", f"{g.power_draw_w:.2f} W"),
                ]
                if wide
                else [kv(2, "Power Draw", f"{g.power_draw_w:.2f} W")]
            ),
            kv(2, "Current Power Limit", f"{g.power_limit_w:.2f} W"),
            kv(1, "Clocks"),
            kv(2, "SM", f"{g.clock_sm_mhz} MHz"),
            kv(2, "Memory", f"{g.clock_mem_mhz} MHz"),
            kv(1, "Max Clocks"),
            kv(2, "SM", f"{g.clock_max_sm_mhz} MHz"),
            kv(2, "Memory", f"{g.clock_max_mem_mhz} MHz"),
            kv(1, "Processes", "None"),
            "",
        ]
    return "\n".join(lines) + "\n"


def render_version(host: SmiHost) -> str:
    nvml = ".".join(host.driver_version.split(".")[:2])
    return (
        f"NVIDIA-SMI version  : {host.driver_version}\n"
        f"NVML version        : {nvml}\n"
        f"DRIVER version      : {host.driver_version}\n"
        f"CUDA Version        : {host.cuda or 'N/A'}\n"
    )


# --- command line ---------------------------------------------------------------------------------


_SEE_HELP = "Please run 'nvidia-smi -h' for help.\n\n"


def _unrecognised(option: str) -> SmiUsageError:
    return SmiUsageError(f"ERROR: Option {option} is not recognized. {_SEE_HELP}")


def _missing_value(option: str) -> SmiUsageError:
    return SmiUsageError(f"ERROR: Option {option} is missing its value. {_SEE_HELP}")


def run(host: SmiHost, argv: list[str], *, now: float | None = None) -> tuple[str, int]:
    """nvidia-smi's behaviour for `argv`: (stdout text, exit code)."""
    try:
        return _run(host, argv, now), 0
    except SmiUsageError as exc:
        return str(exc), exc.code


def _run(host: SmiHost, argv: list[str], now: float | None) -> str:
    query: list[str] | None = None
    fmt: list[str] | None = None
    mode = "table"
    ids: list[int] | None = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        key, eq, inline = arg.partition("=")
        if key in ("--query-gpu", "--format", "-i", "--id"):
            if not eq:
                if not args:
                    raise _missing_value(key)
                inline = args.pop(0)
            if key == "--query-gpu":
                query = [f.strip() for f in inline.split(",") if f.strip()]
            elif key == "--format":
                fmt = [f.strip() for f in inline.split(",")]
            else:
                ids = _parse_ids(inline, host)
        elif arg in ("-L", "--list-gpus"):
            mode = "list"
        elif arg in ("-q", "--query"):
            mode = "query"
        elif arg == "--version":
            mode = "version"
        elif arg in ("-h", "--help"):
            mode = "help"
        else:
            raise _unrecognised(arg)
    shown = SmiHost(
        host.driver_version,
        tuple(g for g in host.gpus if ids is None or g.index in ids),
        tuple(p for p in host.processes if ids is None or p.gpu in ids),
        host.cuda_version,
    )
    if query is not None:
        if fmt is None:
            raise SmiUsageError(f'"--format=" switch is missing. {_SEE_HELP}')
        if not fmt or fmt[0] != "csv" or any(f not in ("csv", "noheader", "nounits") for f in fmt):
            raise SmiUsageError(f'"--format={",".join(fmt)}" is not a valid format.\n')
        return render_csv(shown, query, header="noheader" not in fmt, units="nounits" not in fmt)
    if not host.gpus:
        raise SmiUsageError("No devices were found\n", EXIT_NOT_FOUND)
    if mode == "list":
        return render_list(shown)
    if mode == "query":
        return render_query(shown, now=now)
    if mode == "version":
        return render_version(host)
    if mode == "help":
        return f"NVIDIA System Management Interface -- v{host.driver_version}\n\n{_HELP}"
    return render_table(shown, now=now)


def _parse_ids(text: str, host: SmiHost) -> list[int]:
    ids: list[int] = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) not in {g.index for g in host.gpus}:
            raise SmiUsageError("No devices were found\n", EXIT_NOT_FOUND)
        ids.append(int(part))
    return ids


_HELP = """\
nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    -q,   --query               Display GPU or Unit info.
    -i,   --id=                 Target a specific GPU.
    --query-gpu=                Information about GPU. Call --help-query-gpu for more info.
    --format=                   Comma separated list of format options: csv, noheader, nounits
    --version                   Print version information and exit.
"""


def main(argv: list[str] | None = None, *, config: Path | None = None) -> int:
    """Entry point for the container's `nvidia-smi` shim: host facts come from a JSON file."""
    path = config or Path(os.environ[CONFIG_ENV])
    host = SmiHost.from_json(path.read_text(encoding="utf-8"))
    out, code = run(host, list(sys.argv[1:] if argv is None else argv))
    sys.stdout.write(out)
    sys.stdout.flush()
    return code
