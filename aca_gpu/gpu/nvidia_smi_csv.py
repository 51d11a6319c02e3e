"""The one-line-per-GPU forms: `--query-gpu=... --format=csv[,noheader][,nounits]` and `nvidia-smi -L`.

A CSV header names its fields (`memory.total [MiB]`); a headerless CSV does not, and its columns are
only known from the command that produced it, so the caller must pass that field list. Without it
the input is reported as unreadable rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aca_gpu.gpu.nvidia_smi_model import (
    CSV,
    LIST,
    UNRECOGNIZED,
    Gpu,
    ListedMigDevice,
    MigDevice,
    NvidiaSmi,
    float_of,
    int_of,
    split_pci_device_id,
    unrecognized,
    value,
)

# alternative spellings nvidia-smi accepts for the same field (`--help-query-gpu`)
_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial"}
_PLAIN_FIELDS = frozenset({"index", "name", "uuid", "count", "serial", "pstate", "timestamp"})
_FIELD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.")
HEADERLESS_HINT = "a headerless --query-gpu CSV needs its field list: --fields index,name,memory.total,..."


def field_name(cell: str) -> str:
    """`memory.total [MiB]` -> `memory.total`; aliases -> the canonical name."""
    name = cell.split(" [", 1)[0].strip().lower()
    return _ALIASES.get(name, name)


def _is_header_cell(cell: str) -> bool:
    name, bracket, unit = cell.strip().partition(" [")
    if bracket and not unit.endswith("]"):
        return False
    return bool(name) and name[0].isalpha() and all(c in _FIELD_CHARS for c in name.lower())


def looks_like_header(line: str) -> bool:
    """Every cell is field-name syntax, and at least one is unmistakably a --query-gpu field."""
    cells = line.split(",")
    return all(_is_header_cell(c) for c in cells) and any(
        "." in c or "_" in c or " [" in c or field_name(c) in _PLAIN_FIELDS for c in cells
    )


def looks_like_csv(lines: Sequence[str]) -> bool:
    """Every line has the same number (> 1) of comma-separated cells."""
    counts = {line.count(",") for line in lines}
    return len(counts) == 1 and counts != {0}


def _bare(raw: str | None) -> str | None:
    """CSV brackets unavailable values (`[N/A]`); the table and -q print `N/A`, so match them."""
    if raw is None:
        return None
    return raw[1:-1] if raw.startswith("[") and raw.endswith("]") else raw


def _csv_gpu(position: int, row: Mapping[str, str]) -> Gpu:
    def get(*names: str) -> str | None:
        return next((row[n] for n in names if n in row), None)

    device_id, vendor_id = split_pci_device_id(get("pci.device_id"))
    index = int_of(get("index"))
    return Gpu(
        index=position if index is None else index,
        name=value(get("name")),
        uuid=value(get("uuid")),
        bus_id=value(get("pci.bus_id")),
        memory_total_mib=int_of(get("memory.total"), "MiB"),
        memory_used_mib=int_of(get("memory.used"), "MiB"),
        memory_free_mib=int_of(get("memory.free"), "MiB"),
        memory_reserved_mib=int_of(get("memory.reserved"), "MiB"),
        gpu_util_pct=int_of(get("utilization.gpu"), "%"),
        temperature_c=int_of(get("temperature.gpu"), "C"),
        power_draw_w=float_of(get("power.draw", "power.draw.instant", "power.draw.average"), "W"),
        power_limit_w=float_of(get("power.limit", "enforced.power.limit"), "W"),
        fan_speed_pct=int_of(get("fan.speed"), "%"),
        perf_state=value(get("pstate")),
        compute_mode=value(get("compute_mode")),
        persistence_mode=value(get("persistence_mode")),
        driver_model=value(get("driver_model.current")),
        mig_mode=_bare(get("mig.mode.current")),
        pci_device_id=device_id,
        pci_vendor_id=vendor_id,
    )


def _one_per_gpu(gpus: list[Gpu], names: Sequence[str]) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
    """A `--query-gpu ... -l N` loop prints every GPU once per interval: rows naming the same GPU
    (index, uuid or bus id) are samples of it, and the latest sample stands for it."""
    key = next((k for k in ("index", "uuid", "pci.bus_id") if k in names), None)
    if key is None or len(gpus) < 2:
        return tuple(gpus), ()
    attr = {"index": "index", "uuid": "uuid", "pci.bus_id": "bus_id"}[key]
    latest: dict[object, Gpu] = {}
    for gpu in gpus:
        latest[getattr(gpu, attr)] = gpu
    if len(latest) == len(gpus):
        return tuple(gpus), ()
    note = (
        f"{len(gpus)} rows for {len(latest)} GPU(s): samples of a --query-gpu loop (-l); "
        "the latest sample of each GPU is shown"
    )
    return tuple(latest.values()), (note,)


def parse_csv(lines: Sequence[str], fields: Sequence[str] | None = None) -> NvidiaSmi:
    """`--query-gpu` CSV; `fields` is the `--query-gpu=` list, required when there is no header."""
    data = [line.strip() for line in lines if line.strip()]
    if not data:
        return unrecognized("empty CSV", fmt=CSV)
    first = [c.strip() for c in data[0].split(",")]
    columns: list[str] | None = None
    if fields is not None:
        names = [field_name(f) for f in fields]
        if [field_name(c) for c in first] == names:
            columns, data = first, data[1:]
    elif looks_like_header(data[0]):
        columns, data = first, data[1:]
        names = [field_name(c) for c in columns]
    else:
        return unrecognized("headerless CSV without a field list", fmt=CSV, warnings=(HEADERLESS_HINT,))
    rows: list[list[str]] = [[c.strip() for c in line.split(",")] for line in data]
    bad = next((i for i, cells in enumerate(rows) if len(cells) != len(names)), None)
    if bad is not None:
        return unrecognized(
            f"CSV row {bad + 1} has {len(rows[bad])} cells, the field list has {len(names)}", fmt=CSV
        )
    keys = columns if columns is not None else list(fields or ())
    gpus, warnings = _one_per_gpu(
        [_csv_gpu(i, dict(zip(names, cells, strict=True))) for i, cells in enumerate(rows)], names
    )
    drivers = (
        {value(cells[names.index("driver_version")]) for cells in rows}
        if "driver_version" in names
        else set()
    )
    return NvidiaSmi(
        format=CSV,
        error=None if gpus else UNRECOGNIZED,
        error_message=None if gpus else "CSV header without rows",
        driver_version=drivers.pop() if len(drivers) == 1 else None,
        gpus=gpus,
        query=",".join(names),
        header=columns is not None,
        columns=tuple(columns) if columns is not None else None,
        rows=tuple(dict(zip(keys, cells, strict=True)) for cells in rows),
        warnings=warnings,
    )


# -- nvidia-smi -L ------------------------------------------------------------------------------


def _uuid(line: str) -> str | None:
    at = line.rfind("(UUID: ")
    if at < 0:
        return None
    return line[at + 7 :].rstrip().rstrip(")").strip() or None


def is_list_line(line: str) -> bool:
    """`GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`."""
    head, colon, _ = line.strip().partition(":")
    return bool(colon) and head.startswith("GPU ") and head[4:].isdigit() and "(UUID: " in line


def _mig_line(line: str) -> tuple[str, int] | None:
    """`MIG 3g.40gb     Device  0: (UUID: MIG-...)` -> ("3g.40gb", 0)."""
    words = line.split()
    if len(words) < 4 or words[0] != "MIG" or "Device" not in words:
        return None
    at = words.index("Device")
    number = words[at + 1].rstrip(":") if at + 1 < len(words) else ""
    return (words[1], int(number)) if number.isdigit() else None


def parse_list(lines: Sequence[str]) -> NvidiaSmi:
    gpus: list[tuple[int, str, str | None, list[ListedMigDevice]]] = []
    warnings: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if is_list_line(text):
            head, _, rest = text.partition(":")
            at = rest.rfind("(UUID: ")
            gpus.append((int(head[4:]), rest[:at].strip(), _uuid(text), []))
            continue
        mig = _mig_line(text)
        if mig is not None and gpus:
            gpus[-1][3].append(ListedMigDevice(profile=mig[0], device=mig[1], uuid=_uuid(text)))
        else:
            warnings.append(text)
    if not gpus:
        return unrecognized("no `GPU n: name (UUID: ...)` line", fmt=LIST)
    mig_devices = [
        MigDevice(gpu=index, mig_dev=m.device, profile=m.profile, uuid=m.uuid)
        for index, _, _, migs in gpus
        for m in migs
    ]
    return NvidiaSmi(
        format=LIST,
        gpus=tuple(
            Gpu(index=index, name=name or None, uuid=uuid, mig_devices=tuple(migs) if migs else None)
            for index, name, uuid, migs in gpus
        ),
        mig_devices=tuple(mig_devices) if mig_devices else None,
        warnings=tuple(warnings),
    )
