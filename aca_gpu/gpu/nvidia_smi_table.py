"""The default `nvidia-smi` table, every driver generation from R3xx to R610+.

Column widths change between branches (79, 89 and 91-column layouts, R530 gluing the power cap to
the bar, R580 `+---` under the banner), so rows are split on `|` into cells and each cell is read by
what it contains (`NNNMiB / NNNMiB`, `NNW / NNNW`, `NNC`, `NN%`, a PCI bus id), never by offset.
A line-by-line state machine walks banner -> GPU table -> `MIG devices:` -> `Processes:`; lines
that are not table lines before the banner (timestamps, `oc exec` notices) are skipped, and after
it they become warnings (or the trailing exit-code line some wrappers print).
"""

from __future__ import annotations

from collections.abc import Sequence

from aca_gpu.gpu.nvidia_smi_model import (
    TABLE,
    UNRECOGNIZED,
    Gpu,
    MigDevice,
    NvidiaSmi,
    Process,
    int_of,
    is_bus_id,
    unrecognized,
    value,
    whole_watts,
)

_PERSISTENCE = frozenset({"On", "Off", "N/A", "ERR!", "WDDM", "TCC", "MCDM"})
_GPU_SECTION, _MIG_SECTION, _PROC_SECTION = "gpu", "mig", "proc"


def is_banner(line: str) -> bool:
    return "NVIDIA-SMI " in line and ("Driver Version:" in line or "KMD Version:" in line)


def is_process_title(line: str) -> bool:
    """`| Processes: ... |`, the title row of the process table (which may be pasted alone)."""
    stripped = line.strip()
    return stripped.startswith("|") and stripped[1:].strip().startswith(("Processes:", "Compute processes:"))


def tokens(text: str) -> list[tuple[int, int]]:
    """(start, end) of each whitespace-separated token, so text between tokens keeps its spacing."""
    spans: list[tuple[int, int]] = []
    start = -1
    for i, ch in enumerate(text):
        if ch.isspace():
            if start >= 0:
                spans.append((start, i))
                start = -1
        elif start < 0:
            start = i
    if start >= 0:
        spans.append((start, len(text)))
    return spans


def _after(line: str, label: str) -> str | None:
    """The token printed after `label` on the banner line."""
    at = line.find(label)
    if at < 0:
        return None
    rest = line[at + len(label) :].replace("|", " ").split()
    return rest[0] if rest else None


def parse_banner(line: str) -> tuple[str | None, str | None, str | None]:
    """(nvidia-smi, driver, CUDA) versions from `NVIDIA-SMI x  Driver Version: y  CUDA Version: z`."""
    smi_version = _after(line, "NVIDIA-SMI ")
    driver = _after(line, "Driver Version:") or _after(line, "KMD Version:")
    cuda = _after(line, "CUDA UMD Version:") or _after(line, "CUDA Version:")
    return smi_version, value(driver), value(cuda)


def _cells(stripped: str) -> list[str]:
    inner = stripped[1:] if stripped.startswith("|") else stripped
    if inner.endswith("|"):
        inner = inner[:-1]
    return inner.split("|")


def _is_rule(stripped: str) -> bool:
    """Border and separator lines: only `+`, `-`, `|` and spaces (the `===` header rule is separate)."""
    return all(c in "+-| " for c in stripped)


def _mem_pair(cell: str) -> tuple[int | None, int | None] | None:
    """`2005MiB / 16130MiB` -> (2005, 16130); None when the cell is not a memory cell."""
    words = cell.split()
    if len(words) != 3 or words[1] != "/" or "MiB" not in cell:
        return None
    return int_of(words[0], "MiB"), int_of(words[2], "MiB")


def _gpu_from_rows(rows: Sequence[Sequence[str]], warnings: list[str]) -> Gpu | None:
    first = rows[0][0]
    spans = tokens(first)
    if not spans or not first[spans[0][0] : spans[0][1]].isdigit():
        return None
    index = int(first[spans[0][0] : spans[0][1]])
    persistence: str | None = None
    name_end = spans[-1][1]
    if len(spans) > 2 and first[spans[-1][0] : spans[-1][1]] in _PERSISTENCE:
        persistence = first[spans[-1][0] : spans[-1][1]]
        name_end = spans[-2][1]
    name = first[spans[0][1] : name_end].strip() if len(spans) > 1 else ""
    bus_id = next((t for cell in rows[0][1:] for t in cell.split() if is_bus_id(t)), None)
    gpu: dict[str, object] = {
        "index": index,
        "name": name or None,
        "name_truncated": name.endswith("..."),
        "bus_id": bus_id,
    }
    if persistence in ("WDDM", "TCC", "MCDM"):
        gpu["driver_model"] = persistence
    else:
        gpu["persistence_mode"] = value(persistence)
    if len(rows) < 2:
        warnings.append(f"GPU {index}: only the first table row is present (truncated output?)")
        return Gpu(**gpu)  # type: ignore[arg-type]
    second = rows[1]
    gpu.update(_sensors(second[0]))
    memory = next((m for m in (_mem_pair(c) for c in second[1:]) if m is not None), None)
    if memory is not None:
        gpu["memory_used_mib"], gpu["memory_total_mib"] = memory
    elif len(second) < 2:
        warnings.append(f"GPU {index}: the memory cell is missing (truncated output?)")
    if len(second) >= 3:
        util = second[-1].split()
        if util and (util[0].endswith("%") or util[0] == "N/A"):
            gpu["gpu_util_pct"] = int_of(util[0], "%")
            if len(util) > 1:
                gpu["compute_mode"] = util[-1]
    if len(rows) >= 3 and not rows[2][0].strip():
        gpu["mig_mode"] = rows[2][-1].strip() or None
    return Gpu(**gpu)  # type: ignore[arg-type]


def _sensors(cell: str) -> dict[str, object]:
    """`N/A   47C    P0    54W / 300W` -> fan, temperature, perf state, power draw and cap."""
    words = cell.split()
    right: list[str] = []
    slash = "/" in words  # a lone "/" token: `N/A` itself contains a slash
    if slash:
        at = words.index("/")
        words, right = words[:at], words[at + 1 :]
    out: dict[str, object] = {}
    for i, word in enumerate(words):
        if word.endswith("C") and word[:-1].isdigit():
            out["temperature_c"] = int(word[:-1])
        elif i == 0 and (word.endswith("%") or word == "N/A"):
            out["fan_speed_pct"] = int_of(word, "%")
        elif word.startswith("P") and word[1:].isdigit():
            out["perf_state"] = word
    if slash:
        if len(words) > 1 and (words[-1].endswith("W") or words[-1] == "N/A"):
            out["power_draw_w"] = whole_watts(words[-1])
        out["power_limit_w"] = whole_watts(right[0]) if right else None
    return out


def _mig_device(cells: Sequence[str]) -> MigDevice | None:
    ids = cells[0].split()
    if len(ids) != 4 or not all(i.isdigit() for i in ids):
        return None  # the BAR1 continuation row, or "No MIG devices found"
    memory = next((m for m in (_mem_pair(c) for c in cells[1:]) if m is not None), (None, None))
    sm_words = cells[2].split() if len(cells) > 2 else []
    return MigDevice(
        gpu=int(ids[0]),
        gi=int(ids[1]),
        ci=int(ids[2]),
        mig_dev=int(ids[3]),
        memory_used_mib=memory[0],
        memory_total_mib=memory[1],
        sm=int_of(sm_words[0]) if sm_words else None,
    )


def _is_type(word: str) -> bool:
    return bool(word) and all(part in ("C", "G", "M") for part in word.split("+"))


def _process(row: str) -> Process | None:
    """A process row, R450+ (`GPU GI CI PID Type name mem`), R410-R440 (no GI/CI) or older (no Type)."""
    spans = tokens(row)
    words = [row[a:b] for a, b in spans]
    if len(words) < 4 or not words[0].isdigit():
        return None
    if len(words) >= 6 and words[3].isdigit() and _is_type(words[4]):
        gi, ci, pid_at, type_at = words[1], words[2], 3, 4
    elif words[1].isdigit() and _is_type(words[2]):
        gi, ci, pid_at, type_at = None, None, 1, 2
    elif words[1].isdigit():
        gi, ci, pid_at, type_at = None, None, 1, None
    else:
        return None
    name_from = spans[type_at if type_at is not None else pid_at][1]
    memory = words[-1]
    if len(words) <= (type_at or pid_at) + 1 or not (memory.endswith("MiB") or memory == "N/A"):
        return None
    return Process(
        gpu=int(words[0]),
        gi=gi,
        ci=ci,
        pid=int(words[pid_at]),
        type=words[type_at] if type_at is not None else None,
        name=row[name_from : spans[-1][0]].strip(),
        used_memory_mib=int_of(memory, "MiB"),
    )


def parse_table(lines: Sequence[str]) -> NvidiaSmi:
    """Parse the default view; `lines` may carry text before the banner and after the tables."""
    banner: tuple[str | None, str | None, str | None] | None = None
    section: str | None = None
    in_body = False
    record: list[list[str]] = []
    gpus: list[Gpu] = []
    processes: list[Process] | None = None
    mig_devices: list[MigDevice] | None = None
    warnings: list[str] = []
    trailing: str | None = None

    def flush() -> None:
        if record:
            gpu = _gpu_from_rows(record, warnings)
            if gpu is not None:
                gpus.append(gpu)
            record.clear()

    for line in lines:
        stripped = line.strip()
        if not stripped.startswith(("|", "+")):
            flush()
            section = None
            if not stripped:
                continue
            if banner is None:
                if stripped.upper().startswith("WARNING"):
                    warnings.append(stripped)
            elif stripped.isdigit():
                trailing = stripped
            else:
                warnings.append(stripped)
            continue
        if is_banner(stripped):
            if banner is not None:
                warnings.append("more than one nvidia-smi table in the input; read the first")
                break
            banner = parse_banner(stripped)
            section, in_body = _GPU_SECTION, False
            continue
        if banner is None and section != _PROC_SECTION and not is_process_title(stripped):
            continue
        cells = _cells(stripped)
        title = cells[0].strip()
        if title.startswith("MIG devices:"):
            flush()
            section, in_body, mig_devices = _MIG_SECTION, False, []
        elif title.startswith(("Processes:", "Compute processes:")):
            flush()
            section, in_body, processes = _PROC_SECTION, False, []
        elif stripped[1:2] == "=":
            in_body = True
        elif _is_rule(stripped):
            flush()
        elif not in_body:
            continue
        elif section == _GPU_SECTION:
            starts_gpu = title.split()[0].isdigit() if title else False
            if starts_gpu:
                flush()  # a new GPU row even without the separator line before it
            if record or starts_gpu:
                record.append(cells)
        elif section == _MIG_SECTION and mig_devices is not None:
            device = _mig_device(cells)
            if device is not None:
                mig_devices.append(device)
        elif section == _PROC_SECTION and processes is not None:
            proc = _process("|".join(cells))
            if proc is not None:
                processes.append(proc)
    flush()

    if banner is None and processes is not None:
        return NvidiaSmi(
            format=TABLE,
            error=UNRECOGNIZED,
            error_message=f"nvidia-smi's process table alone ({len(processes)} processes): it names no "
            "GPU, driver or CUDA version; give the whole output",
            processes=tuple(processes),
            warnings=tuple(warnings),
            missing=("banner (driver and CUDA version)", "GPU rows"),
        )
    if banner is None:
        return unrecognized("no nvidia-smi banner found", fmt=TABLE)
    smi_version, driver, cuda = banner
    no_rows = not gpus
    if no_rows:
        warnings.append("the table lists no GPU rows (truncated output?)")
    return NvidiaSmi(
        format=TABLE,
        error=UNRECOGNIZED if no_rows else None,
        error_message=f"nvidia-smi table without GPU rows (cut after its header?): driver {driver}, "
        f"CUDA {cuda} read, the GPUs are missing"
        if no_rows
        else None,
        nvidia_smi_version=smi_version,
        driver_version=driver,
        cuda_version=cuda,
        gpus=tuple(gpus),
        processes=tuple(processes) if processes is not None else None,
        mig_devices=tuple(mig_devices) if mig_devices is not None else None,
        warnings=tuple(warnings),
        trailing_exit_code_line=trailing,
        missing=("GPU rows", *(() if processes is not None else ("process table",))) if no_rows else (),
    )
