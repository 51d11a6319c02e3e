"""`nvidia-smi -q` (indented `Key : Value` text) and `nvidia-smi -q -x` (XML, `nvidia_smi_log`).

-q: keys are read by their section path (`FB Memory Usage/Total`), from the indentation, so the key
column width (42 up to R5xx, 55 in R610) and added or removed keys don't matter. Renamed keys are
read under every name they have had: `Power Readings` -> `GPU Power Readings`, `Power Draw` ->
`Instantaneous Power Draw`, `Utilization/Gpu` -> `GPU`, and R610's `KMD Version` /
`CUDA UMD Version` win over the deprecated `Driver Version` / `CUDA Version` values.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from aca_gpu.gpu.nvidia_smi_model import (
    NO_DEVICES,
    QUERY,
    UNRECOGNIZED,
    XML,
    Gpu,
    MigDevice,
    NvidiaSmi,
    Process,
    float_of,
    int_of,
    split_pci_device_id,
    unrecognized,
    value,
)

_POWER_DRAW = (
    "GPU Power Readings/Power Draw",
    "GPU Power Readings/Instantaneous Power Draw",
    "GPU Power Readings/Average Power Draw",
    "Power Readings/Power Draw",
    "Power Readings/Instantaneous Power Draw",
)
_POWER_LIMIT = (
    "GPU Power Readings/Current Power Limit",
    "GPU Power Readings/GPU Ceiling Power Limit/Current Power Limit",
    "Power Readings/Current Power Limit",
    "Power Readings/Power Limit",
)


def clean_version(raw: str | None) -> str | None:
    """`610.88 [Deprecated; ...]` -> `610.88`; `Not Found` / `N/A` -> None."""
    got = value(raw)
    return value(got.split(" [", 1)[0]) if got is not None else None


def _split_kv(text: str) -> tuple[str, str | None]:
    at = text.find(" : ")
    if at >= 0:
        return text[:at].strip(), text[at + 3 :].strip()
    if text.endswith(":"):
        return text[:-1].strip(), ""
    return text, None


class _GpuBlock:
    def __init__(self, bus_id: str) -> None:
        self.bus_id = bus_id
        self.values: dict[str, str] = {}
        self.processes: list[dict[str, str | None]] | None = None
        self._pending: dict[str, str | None] = {}

    def process_value(self, key: str, val: str) -> None:
        """Processes repeat the same keys per process; `Process ID` starts each one."""
        if self.processes is None:
            self.processes = []
        if key in ("GPU instance ID", "Compute instance ID"):
            self._pending[key] = val
        elif key == "Process ID":
            self.processes.append({**self._pending, key: val})
            self._pending = {}
        elif self.processes:
            self.processes[-1].setdefault(key, val)


def _first(values: Mapping[str, str], keys: Sequence[str]) -> str | None:
    return next((values[k] for k in keys if k in values), None)


def _gpu_from_block(index: int, block: _GpuBlock) -> Gpu:
    v = block.values
    device_id, vendor_id = split_pci_device_id(v.get("PCI/Device Id"))
    return Gpu(
        index=index,
        name=value(v.get("Product Name")),
        uuid=value(v.get("GPU UUID")),
        bus_id=value(block.bus_id) or value(v.get("PCI/Bus Id")),
        memory_total_mib=int_of(v.get("FB Memory Usage/Total"), "MiB"),
        memory_used_mib=int_of(v.get("FB Memory Usage/Used"), "MiB"),
        memory_free_mib=int_of(v.get("FB Memory Usage/Free"), "MiB"),
        memory_reserved_mib=int_of(v.get("FB Memory Usage/Reserved"), "MiB"),
        gpu_util_pct=int_of(_first(v, ("Utilization/Gpu", "Utilization/GPU")), "%"),
        temperature_c=int_of(v.get("Temperature/GPU Current Temp"), "C"),
        power_draw_w=float_of(_first(v, _POWER_DRAW), "W"),
        power_limit_w=float_of(_first(v, _POWER_LIMIT), "W"),
        fan_speed_pct=int_of(v.get("Fan Speed"), "%"),
        perf_state=value(v.get("Performance State")),
        compute_mode=value(v.get("Compute Mode")),
        persistence_mode=value(v.get("Persistence Mode")),
        driver_model=v.get("Driver Model/Current"),
        mig_mode=v.get("MIG Mode/Current"),
        brand=value(v.get("Product Brand")),
        architecture=value(v.get("Product Architecture")),
        pci_device_id=device_id,
        pci_vendor_id=vendor_id,
    )


def _process(gpu: int, raw: Mapping[str, str | None]) -> Process | None:
    pid = int_of(raw.get("Process ID"))
    if pid is None:
        return None
    return Process(
        gpu=gpu,
        pid=pid,
        type=value(raw.get("Type")),
        name=raw.get("Name") or "",
        used_memory_mib=int_of(raw.get("Used GPU Memory"), "MiB"),
        gi=raw.get("GPU instance ID"),
        ci=raw.get("Compute instance ID"),
    )


# sections of one GPU's `-q` block that people paste on their own (bug reports, forum answers)
FRAGMENT_SECTIONS = frozenset(
    {
        "ECC Mode",
        "ECC Errors",
        "Retired Pages",
        "Remapped Rows",
        "GPU Reset Status",
        "Clocks Event Reasons",
        "Clocks Throttle Reasons",
        "PCI",
        "GPU Link Info",
        "Clocks",
        "Max Clocks",
    }
)
_FRAGMENT_MISSING = (
    "NVSMI LOG header (driver and CUDA version)",
    "the GPU's name and bus id",
    "other -q sections",
)
# a section's own keys, for a paste that lost even the section's title line
_SECTION_OF_KEY = {
    "Volatile": "ECC Errors",
    "Aggregate": "ECC Errors",
    "Idle": "Clocks Event Reasons",
    "Applications Clocks Setting": "Clocks Event Reasons",
    "SW Power Cap": "Clocks Event Reasons",
    "HW Slowdown": "Clocks Event Reasons",
    "Single Bit ECC": "Retired Pages",
    "Double Bit ECC": "Retired Pages",
    "Pending Page Blacklist": "Retired Pages",
    "Pending Page Retirement": "Retired Pages",
    "Correctable Error": "Remapped Rows",
    "Uncorrectable Error": "Remapped Rows",
    "Remapping Failure Occurred": "Remapped Rows",
    "Reset Required": "GPU Reset Status",
    "Drain and Reset Recommended": "GPU Reset Status",
}


def _title_like(key: str) -> bool:
    return bool(key) and key[0].isalpha() and all(c.isalnum() or c in " .-/()" for c in key)


def fragment_sections(lines: Sequence[str]) -> list[str] | None:
    """The `-q` sections of a paste that is only part of one GPU's block (no `NVSMI LOG` title, no
    `GPU <bus id>` line), in the order they appear; None when the text is not such a fragment.

    A fragment is judged rather than refused: an `ECC Errors` block on its own still says whether the
    card has uncorrectable errors. Every line must read as a `-q` line (a section title or
    `key : value`), so other text never passes for one."""
    content = [line.rstrip() for line in lines if line.strip()]
    if not content or any(line.lstrip().startswith(("GPU 0", "Attached GPUs")) for line in content):
        return None
    pairs = 0
    for line in content:
        key, val = _split_kv(line.strip())
        if val is None and (
            not key or not key[0].isalpha() or not all(c.isalnum() or c in " .-/()" for c in key)
        ):
            return None
        pairs += val is not None
    if pairs < 2:
        return None
    floor = min(len(line) - len(line.lstrip()) for line in content)
    top = [_split_kv(line.strip()) for line in content if len(line) - len(line.lstrip()) == floor]
    titles = [key for key, val in top if val is None and key in FRAGMENT_SECTIONS]
    if titles:
        return titles
    inferred = {_SECTION_OF_KEY[key] for key, _ in top if key in _SECTION_OF_KEY}
    return sorted(inferred) if len(inferred) == 1 else None


def _fragment_as_block(lines: Sequence[str]) -> list[str]:
    """A fragment indented as inside a GPU's block, its lost section title put back."""
    content = [line.rstrip() for line in lines if line.strip()]
    floor = min(len(line) - len(line.lstrip()) for line in content)
    body = [line[floor:] for line in content]
    first_key, first_val = _split_kv(body[0].strip())
    if first_val is not None or first_key not in FRAGMENT_SECTIONS:
        title = _SECTION_OF_KEY.get(first_key) or next(
            _SECTION_OF_KEY[k] for k, _ in (_split_kv(b.strip()) for b in body) if k in _SECTION_OF_KEY
        )
        body = [title] + ["    " + b for b in body]
    return ["    " + b for b in body]


def query_blocks(lines: Sequence[str]) -> tuple[dict[str, str], list[_GpuBlock]] | None:
    """The top-level values and one block of `section/key -> value` per GPU; None without a title.

    Shared by `parse_query` and the health reading (`nvidia_smi_health`), which reads sections this
    module does not model (ECC, retired pages, remapped rows, PCIe link, clock reasons)."""
    start = next((i for i, line in enumerate(lines) if "NVSMI LOG" in line), None)
    if start is None and any(line.startswith("Attached GPUs") and " : " in line for line in lines):
        start = -1  # the title cut away (a report quoting its key lines): read from the first line
    blocks: list[_GpuBlock] = []
    if start is None and fragment_sections(lines) is not None:
        lines, start = _fragment_as_block(lines), -1
        blocks.append(_GpuBlock(""))  # one GPU, which the paste does not name
    if start is None:
        return None
    top: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in lines[start + 1 :]:
        text = line.strip()
        if not text:
            continue
        indent = len(line) - len(line.lstrip())
        key, val = _split_kv(text)
        if indent == 0:
            stack.clear()
            if val is None and key.startswith("GPU "):
                blocks.append(_GpuBlock(key[4:].strip()))
            elif val is not None:
                top.setdefault(key, val)
            continue
        if not blocks:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if val is None:
            stack.append((indent, key))
            continue
        path = "/".join([name for _, name in stack] + [key])
        blocks[-1].values.setdefault(path, val)
        if stack and stack[0][1] == "Processes":
            blocks[-1].process_value(key, val)
        elif not stack and key == "Processes":  # `Processes : None`
            blocks[-1].processes = blocks[-1].processes or []
    return top, blocks


def parse_query(lines: Sequence[str]) -> NvidiaSmi:
    """`nvidia-smi -q` text; `lines` start anywhere before the `NVSMI LOG` title."""
    found = query_blocks(lines)
    if found is None:
        return unrecognized("no NVSMI LOG title found", fmt=QUERY)
    top, blocks = found
    gpus = tuple(_gpu_from_block(i, block) for i, block in enumerate(blocks))
    processes: list[Process] | None = None
    for i, block in enumerate(blocks):
        if block.processes is not None:
            processes = processes or []
            processes.extend(p for p in (_process(i, raw) for raw in block.processes) if p is not None)
    headed = any("NVSMI LOG" in line or line.startswith("Attached GPUs") for line in lines)
    sections = None if headed else fragment_sections(lines)
    kmd = value(top.get("KMD Version"))
    umd = value(top.get("CUDA UMD Version"))
    attached = int_of(top.get("Attached GPUs"))
    no_gpus = not gpus
    return NvidiaSmi(
        format=QUERY,
        error=NO_DEVICES if no_gpus and attached == 0 else (UNRECOGNIZED if no_gpus else None),
        error_message="-q output lists no GPU" if no_gpus else None,
        driver_version=kmd or clean_version(top.get("Driver Version")),
        cuda_version=umd or clean_version(top.get("CUDA Version")),
        driver_version_raw=top.get("Driver Version"),
        cuda_version_raw=top.get("CUDA Version"),
        kmd_version=kmd,
        cuda_umd_version=umd,
        attached_gpus=attached,
        gpus=gpus,
        processes=tuple(processes) if processes is not None else None,
        warnings=(f"a -q section pasted alone ({', '.join(sections)}): judged as one GPU",)
        if sections
        else (),
        missing=(
            "NVSMI LOG header (driver and CUDA version)",
            "the GPU's name and bus id",
            "other -q sections",
        )
        if sections
        else (),
    )


# -- nvidia-smi -q -x ---------------------------------------------------------------------------


def _text(node: ET.Element | None, *paths: str) -> str | None:
    """The text at the first of `paths` that exists under `node`."""
    if node is None:
        return None
    for path in paths:
        found = node.find(path)
        if found is not None and found.text is not None:
            return found.text.strip()
    return None


def _xml_gpu(index: int, node: ET.Element) -> Gpu:
    device_id, vendor_id = split_pci_device_id(_text(node, "pci/pci_device_id"))
    power = ("gpu_power_readings", "power_readings")
    return Gpu(
        index=index,
        name=value(_text(node, "product_name")),
        uuid=value(_text(node, "uuid")),
        bus_id=value(node.get("id")) or value(_text(node, "pci/pci_bus_id")),
        memory_total_mib=int_of(_text(node, "fb_memory_usage/total"), "MiB"),
        memory_used_mib=int_of(_text(node, "fb_memory_usage/used"), "MiB"),
        memory_free_mib=int_of(_text(node, "fb_memory_usage/free"), "MiB"),
        memory_reserved_mib=int_of(_text(node, "fb_memory_usage/reserved"), "MiB"),
        gpu_util_pct=int_of(_text(node, "utilization/gpu_util"), "%"),
        temperature_c=int_of(_text(node, "temperature/gpu_temp"), "C"),
        power_draw_w=float_of(
            _text(node, *(f"{p}/{k}" for p in power for k in ("power_draw", "instant_power_draw"))), "W"
        ),
        power_limit_w=float_of(
            _text(node, *(f"{p}/{k}" for p in power for k in ("current_power_limit", "power_limit"))), "W"
        ),
        fan_speed_pct=int_of(_text(node, "fan_speed"), "%"),
        perf_state=value(_text(node, "performance_state")),
        compute_mode=value(_text(node, "compute_mode")),
        persistence_mode=value(_text(node, "persistence_mode")),
        driver_model=_text(node, "driver_model/current_dm"),
        mig_mode=_text(node, "mig_mode/current_mig"),
        brand=value(_text(node, "product_brand")),
        architecture=value(_text(node, "product_architecture")),
        pci_device_id=device_id,
        pci_vendor_id=vendor_id,
    )


def _xml_processes(index: int, node: ET.Element) -> list[Process] | None:
    procs = node.find("processes")
    if procs is None:
        return None
    out: list[Process] = []
    for info in procs.findall("process_info"):
        pid = int_of(_text(info, "pid"))
        if pid is None:
            continue
        out.append(
            Process(
                gpu=index,
                pid=pid,
                type=value(_text(info, "type")),
                name=_text(info, "process_name") or "",
                used_memory_mib=int_of(_text(info, "used_memory"), "MiB"),
                gi=_text(info, "gpu_instance_id"),
                ci=_text(info, "compute_instance_id"),
            )
        )
    return out


def _xml_mig_devices(index: int, node: ET.Element) -> list[MigDevice] | None:
    devices = node.find("mig_devices")
    if devices is None:
        return None
    out: list[MigDevice] = []
    for dev in devices.findall("mig_device"):
        mig_dev = int_of(_text(dev, "index"))
        if mig_dev is None:
            continue
        out.append(
            MigDevice(
                gpu=index,
                mig_dev=mig_dev,
                gi=int_of(_text(dev, "gpu_instance_id")),
                ci=int_of(_text(dev, "compute_instance_id")),
                memory_used_mib=int_of(_text(dev, "fb_memory_usage/used"), "MiB"),
                memory_total_mib=int_of(_text(dev, "fb_memory_usage/total"), "MiB"),
                sm=int_of(_text(dev, "device_attributes/shared/multiprocessor_count")),
                uuid=value(_text(dev, "uuid")),
            )
        )
    return out


def parse_xml(text: str) -> NvidiaSmi:
    """`nvidia-smi -q -x`. Entity declarations are refused: real output never has them."""
    if "<!ENTITY" in text:
        return unrecognized("XML with entity declarations is not nvidia-smi output", fmt=XML)
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        return unrecognized(f"malformed nvidia-smi XML: {exc}", fmt=XML)
    if root.tag != "nvidia_smi_log":
        return unrecognized(f"XML root is <{root.tag}>, not <nvidia_smi_log>", fmt=XML)
    nodes = root.findall("gpu")
    gpus = tuple(_xml_gpu(i, node) for i, node in enumerate(nodes))
    processes: list[Process] | None = None
    mig_devices: list[MigDevice] | None = None
    for i, node in enumerate(nodes):
        procs = _xml_processes(i, node)
        if procs is not None:
            processes = (processes or []) + procs
        migs = _xml_mig_devices(i, node)
        if migs is not None:
            mig_devices = (mig_devices or []) + migs
    kmd = value(_text(root, "kmd_version"))
    umd = value(_text(root, "cuda_umd_version"))
    attached = int_of(_text(root, "attached_gpus"))
    no_gpus = not gpus
    return NvidiaSmi(
        format=XML,
        error=NO_DEVICES if no_gpus and attached == 0 else (UNRECOGNIZED if no_gpus else None),
        error_message="-q -x output lists no GPU" if no_gpus else None,
        driver_version=kmd or clean_version(_text(root, "driver_version")),
        cuda_version=umd or clean_version(_text(root, "cuda_version")),
        driver_version_raw=_text(root, "driver_version"),
        cuda_version_raw=_text(root, "cuda_version"),
        kmd_version=kmd,
        cuda_umd_version=umd,
        attached_gpus=attached,
        gpus=gpus,
        processes=tuple(processes) if processes is not None else None,
        mig_devices=tuple(mig_devices) if mig_devices is not None else None,
    )
