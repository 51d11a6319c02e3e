"""GPU health from `nvidia-smi -q` (and `-q -x`, via `nvidia_smi_health_xml`), read the way operators
read it, and one verdict per GPU.

What is read (every driver branch prints a different subset; each is read under every name it has had,
and what a driver did not print is listed in `unread`, never guessed):

- ECC mode and error counts, volatile (since the driver loaded) and aggregate (lifetime). R510+ prints
  `SRAM/DRAM Correctable/Uncorrectable` (R550+ splits SRAM into `Parity` / `SEC-DED`), older drivers
  `Single Bit` / `Double Bit` trees with a `Total`; `SRAM Threshold Exceeded`.
- Retired pages (single/double bit, `Pending Page Blacklist`): N/A on parts that remap rows instead.
- Remapped rows (correctable, uncorrectable, `Pending`, `Remapping Failure Occurred`): `N/A` before Ampere.
- `GPU Reset Status` (R535+): `Reset Required`, `Drain and Reset Recommended`.
- PCIe link generation and width, current against max.
- Clock event reasons (`Clocks Event Reasons` from R535, `Clocks Throttle Reasons` before).
- Persistence and compute mode.

Verdicts (NVIDIA's memory error management and dynamic page retirement guides):
`failed` — uncorrectable ECC errors since boot, SRAM threshold exceeded, a row remap failure, a page
retirement pending, an uncorrectable error waiting for its row remap (drain and reset), a GPU that needs
a reset or is lost, compute prohibited; `degraded` — the card
works but an operator would act: correctable errors since boot, a row remap pending (a reset applies
it), drain-and-reset recommended, a PCIe link narrower than its maximum (or slower while busy),
hardware slowdown / thermal / power-brake clock events, ECC switched off on a data-center GPU (GeForce,
TITAN and workstation cards ship with it off: info there); `healthy` otherwise, with
informational findings (lifetime counts, rows already remapped, persistence off) kept as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aca_gpu.gpu.nvidia_smi_health_xml import xml_blocks
from aca_gpu.gpu.nvidia_smi_model import int_of, unwrap_paste, value
from aca_gpu.gpu.nvidia_smi_query import query_blocks

HEALTHY: Final = "healthy"
DEGRADED: Final = "degraded"
FAILED: Final = "failed"
INFO: Final = "info"
VERDICTS = (HEALTHY, DEGRADED, FAILED)
_RANK = {HEALTHY: 0, INFO: 0, DEGRADED: 1, FAILED: 2}

# clock event reason names as nvidia-smi prints them -> the tester's names (NVML bit names)
REASONS = {
    "Idle": "idle",
    "Applications Clocks Setting": "app-clocks",
    "SW Power Cap": "sw-power-cap",
    "HW Slowdown": "hw-slowdown",
    "HW Thermal Slowdown": "hw-thermal",
    "HW Power Brake Slowdown": "hw-power-brake",
    "Sync Boost": "sync-boost",
    "SW Thermal Slowdown": "sw-thermal",
    "Display Clock Setting": "display-clocks",
}
_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
_SLOWDOWNS = ("hw-slowdown", "hw-thermal", "hw-power-brake", "sw-thermal")
# what nvidia-smi prints in place of values when the GPU has fallen off the bus or needs a reset
_LOST = ("gpu is lost", "gpu requires reset", "system is not in ready state")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass(frozen=True)
class Finding:
    """One thing the output says: `severity` failed | degraded | info, `evidence` as nvidia-smi put it."""

    code: str
    severity: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class GpuHealth:
    index: int
    bus_id: str | None
    name: str | None
    verdict: str
    findings: tuple[Finding, ...] = ()
    unread: tuple[str, ...] = ()  # checks this driver did not print, or printed as N/A
    readings: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "bus_id": self.bus_id,
            "name": self.name,
            "verdict": self.verdict,
            "findings": [f.as_dict() for f in self.findings],
            "unread": list(self.unread),
            "readings": dict(self.readings),
        }


@dataclass(frozen=True)
class HealthReport:
    """Every GPU's verdict; `verdict` is the worst. `error` says why nothing could be read."""

    verdict: str | None
    gpus: tuple[GpuHealth, ...] = ()
    topology: Mapping[str, Any] | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED

    @property
    def degraded(self) -> bool:
        return self.verdict == DEGRADED

    def problems(self, severity: str) -> list[str]:
        """`gpuN: message` for every finding of `severity`, in GPU order."""
        return [f"gpu{g.index}: {f.message}" for g in self.gpus for f in g.findings if f.severity == severity]

    def summary(self) -> str:
        """One line: the verdict and the first reason for it."""
        if self.verdict is None:
            return f"health not read ({self.error or 'no nvidia-smi -q output'})"
        worst = self.problems(FAILED) or self.problems(DEGRADED)
        return self.verdict + (
            f": {worst[0]}" + (f" (+{len(worst) - 1} more)" if len(worst) > 1 else "") if worst else ""
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "summary": self.summary(),
            "gpus": [g.as_dict() for g in self.gpus],
            "topology": dict(self.topology) if self.topology is not None else None,
            "error": self.error,
        }


def _yes(text: str | None) -> bool | None:
    got = value(text)
    if got is None:
        return None
    return got.lower() in ("yes", "active", "enabled", "true")


def _width(text: str | None) -> int | None:
    got = value(text)
    return int_of(got[:-1]) if got and got.lower().endswith("x") else int_of(got)


def _counts(values: Mapping[str, str], scope: str) -> tuple[int | None, int | None, list[str]]:
    """(correctable, uncorrectable, what was summed) under `ECC Errors/<scope>/`, in either layout."""
    prefix = f"ECC Errors/{scope}/"
    rows = {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
    if any(k.startswith(("Single Bit/", "Double Bit/")) for k in rows):  # R4xx-R5xx pre-Ampere layout
        out: list[int | None] = []
        for tree in ("Single Bit", "Double Bit"):
            total = int_of(rows.get(f"{tree}/Total"))
            if total is None:
                parts = [int_of(v) for k, v in rows.items() if k.startswith(f"{tree}/")]
                known = [p for p in parts if p is not None]
                total = sum(known) if known else None
            out.append(total)
        return out[0], out[1], ["Single Bit/Total", "Double Bit/Total"]
    corrected = [int_of(v) for k, v in rows.items() if "Correctable" in k and "Uncorrectable" not in k]
    uncorrected = [int_of(v) for k, v in rows.items() if "Uncorrectable" in k]
    c = [n for n in corrected if n is not None]
    u = [n for n in uncorrected if n is not None]
    return (sum(c) if c else None), (sum(u) if u else None), sorted(rows)


def _reasons(values: Mapping[str, str]) -> dict[str, bool] | None:
    for section in _REASON_SECTIONS:
        found = {
            REASONS[k[len(section) + 1 :]]: bool(_yes(v))
            for k, v in values.items()
            if k.startswith(section + "/") and k[len(section) + 1 :] in REASONS
        }
        if found:
            return found
    return None


class _Judge:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.unread: list[str] = []

    def add(self, code: str, severity: str, message: str) -> None:
        self.findings.append(Finding(code, severity, message))

    @property
    def verdict(self) -> str:
        worst = max((_RANK[f.severity] for f in self.findings), default=0)
        return {0: HEALTHY, 1: DEGRADED, 2: FAILED}[worst]


def ecc_off_by_default(product: str) -> bool:
    """GeForce, TITAN and workstation (Quadro / RTX) cards ship with ECC off, or have none: off is
    their normal state, not a fault. Data-center parts (Tesla, A100, H100, L4, T4 ...) ship with it on."""
    low = product.lower()
    if any(mark in low for mark in ("geforce", "titan", "quadro")):
        return True
    # `NVIDIA RTX A6000`, `RTX 2000 Ada Generation`, `NVIDIA RTX PRO 6000 ... Workstation Edition`
    return low.startswith(("nvidia rtx", "rtx")) and "server" not in low


def _ecc(v: Mapping[str, str], j: _Judge, r: dict[str, Any]) -> None:
    mode = value(v.get("ECC Mode/Current"))
    r["ecc_mode"] = mode
    vol_c, vol_u, _ = _counts(v, "Volatile")
    agg_c, agg_u, _ = _counts(v, "Aggregate")
    r.update(ecc_volatile_corrected=vol_c, ecc_volatile_uncorrected=vol_u)
    r.update(ecc_aggregate_corrected=agg_c, ecc_aggregate_uncorrected=agg_u)
    if mode is None and vol_c is None and vol_u is None:
        j.unread.append("ecc")
    if mode is not None and mode.lower() == "disabled":
        name = value(v.get("Product Name")) or ""
        if ecc_off_by_default(f"{name} {value(v.get('Product Brand')) or ''}".strip()):
            j.add("ecc-off", INFO, f"ECC is disabled, as it ships on {name or 'this product'}")
        else:
            j.add("ecc-off", DEGRADED, "ECC is disabled on a data-center GPU: memory errors go undetected")
    if vol_u:
        j.add("ecc-uncorrectable", FAILED, f"{vol_u} uncorrectable ECC error(s) since the driver loaded")
    if vol_c:
        j.add("ecc-correctable", DEGRADED, f"{vol_c} correctable ECC error(s) since the driver loaded")
    if agg_u and not vol_u:
        j.add(
            "ecc-lifetime-uncorrectable", INFO, f"{agg_u} uncorrectable ECC error(s) in the card's lifetime"
        )
    if agg_c and not vol_c:
        j.add("ecc-lifetime-correctable", INFO, f"{agg_c} correctable ECC error(s) in the card's lifetime")
    threshold = next((val for k, val in v.items() if k.endswith("/SRAM Threshold Exceeded")), None)
    if _yes(threshold):
        j.add(
            "sram-threshold",
            FAILED,
            "SRAM Threshold Exceeded: Yes (uncorrectable SRAM errors past NVIDIA's limit)",
        )


def _pages(v: Mapping[str, str], j: _Judge, r: dict[str, Any]) -> None:
    keys = [k for k in v if k.startswith("Retired Pages/")]
    pending_key = next((k for k in keys if k.split("/", 1)[1].startswith("Pending")), None)
    sbe = int_of(v.get("Retired Pages/Single Bit ECC"))
    dbe = int_of(v.get("Retired Pages/Double Bit ECC"))
    pending = _yes(v.get(pending_key)) if pending_key else None
    r.update(retired_pages_sbe=sbe, retired_pages_dbe=dbe, retired_pages_pending=pending)
    if not keys:
        j.unread.append("retired pages")
    elif sbe is None and dbe is None and pending is None:
        j.unread.append("retired pages (N/A on this GPU)")
    if pending:
        j.add("page-retirement-pending", FAILED, "Pending Page Blacklist: Yes (pages wait for retirement)")
    if sbe or dbe:
        j.add("pages-retired", INFO, f"retired pages: {sbe or 0} single-bit, {dbe or 0} double-bit")


def _rows(v: Mapping[str, str], j: _Judge, r: dict[str, Any]) -> None:
    keys = [k for k in v if k.startswith("Remapped Rows/")]
    corr = int_of(v.get("Remapped Rows/Correctable Error"))
    unc = int_of(v.get("Remapped Rows/Uncorrectable Error"))
    pending = _yes(v.get("Remapped Rows/Pending"))
    failure = _yes(v.get("Remapped Rows/Remapping Failure Occurred"))
    r.update(
        remapped_correctable=corr, remapped_uncorrectable=unc, remap_pending=pending, remap_failure=failure
    )
    if not keys:
        j.unread.append("remapped rows" + (" (N/A before Ampere)" if "Remapped Rows" in v else ""))
    if failure:
        j.add("remap-failure", FAILED, "Remapping Failure Occurred: Yes (no spare row left for a bad one)")
    if pending and (unc or _volatile_uncorrectable(v)):
        # an uncorrectable error whose row waits for its remap: operators drain the GPU and reset it
        # before it takes work again (NVIDIA's memory error management guide)
        j.add(
            "remap-pending-uncorrectable",
            FAILED,
            "an uncorrectable memory error waits for its row remap: drain the GPU and reset it before reuse",
        )
    elif pending:
        j.add("remap-pending", DEGRADED, "row remapping pending: a GPU reset applies it")
    if (corr or unc) and not pending and not failure:
        j.add(
            "rows-remapped",
            INFO,
            f"rows remapped: {corr or 0} for correctable, {unc or 0} for uncorrectable errors",
        )


def _volatile_uncorrectable(v: Mapping[str, str]) -> bool:
    return bool(_counts(v, "Volatile")[1])


def _reset(v: Mapping[str, str], j: _Judge, r: dict[str, Any], lost: str | None) -> None:
    required = _yes(v.get("GPU Reset Status/Reset Required"))
    drain = _yes(v.get("GPU Reset Status/Drain and Reset Recommended"))
    # R580 replaced the reset status with the driver's recovery action (None, Reset, Reboot, Drain ...)
    action = value(v.get("GPU Recovery Action"))
    r.update(reset_required=required, drain_and_reset=drain, recovery_action=action)
    if "GPU Reset Status/Reset Required" not in v and action is None:
        j.unread.append("reset status")
    low = (action or "none").lower()
    if required or (low != "none" and ("reset" in low or "reboot" in low) and "drain" not in low):
        why = f"GPU Recovery Action: {action}" if action and not required else "Reset Required: Yes"
        j.add("reset-required", FAILED, f"{why} (the GPU must be reset before it is used)")
    if drain or low.startswith("drain"):
        why = (
            f"GPU Recovery Action: {action}"
            if low.startswith("drain")
            else "Drain and Reset Recommended: Yes"
        )
        j.add("drain-and-reset", DEGRADED, why)
    if lost:
        j.add("gpu-lost", FAILED, f"nvidia-smi cannot read the GPU: {lost}")


def _pcie(v: Mapping[str, str], j: _Judge, r: dict[str, Any], busy: bool) -> None:
    base = "PCI/GPU Link Info/"
    gen_max = int_of(v.get(base + "PCIe Generation/Max"))
    gen_cur = int_of(v.get(base + "PCIe Generation/Current"))
    w_max = _width(v.get(base + "Link Width/Max"))
    w_cur = _width(v.get(base + "Link Width/Current"))
    r.update(pcie_gen=gen_cur, pcie_gen_max=gen_max, pcie_width=w_cur, pcie_width_max=w_max)
    if None in (gen_max, gen_cur) and None in (w_max, w_cur):
        j.unread.append("pcie link")
        return
    if w_max and w_cur and w_cur < w_max:
        j.add("pcie-width", DEGRADED, f"PCIe link x{w_cur} of x{w_max}: trained below its width")
    if gen_max and gen_cur and gen_cur < gen_max:
        if busy:
            j.add("pcie-gen", DEGRADED, f"PCIe gen {gen_cur} of {gen_max} while the GPU is busy")
        else:
            j.add(
                "pcie-gen-idle", INFO, f"PCIe gen {gen_cur} of {gen_max} at idle (links slow down when idle)"
            )


def _clocks(v: Mapping[str, str], j: _Judge, r: dict[str, Any]) -> bool:
    """Clock event reasons; returns whether the GPU looked busy (not idle) when this was printed."""
    reasons = _reasons(v)
    r["clock_reasons"] = sorted(k for k, on in (reasons or {}).items() if on)
    r["sm_clock_mhz"] = int_of(v.get("Clocks/SM"), "MHz")
    r["sm_clock_max_mhz"] = int_of(v.get("Max Clocks/SM"), "MHz")
    if reasons is None:
        j.unread.append("clock event reasons")
        return False
    for name in _SLOWDOWNS:
        if reasons.get(name):
            label = next(k for k, n in REASONS.items() if n == name)
            where = f" (SM {r['sm_clock_mhz']} of {r['sm_clock_max_mhz']} MHz)" if r["sm_clock_mhz"] else ""
            j.add(f"clocks-{name}", DEGRADED, f"clock event {label}: Active{where}")
    return not reasons.get("idle", False)


def _modes(v: Mapping[str, str], j: _Judge, r: dict[str, Any]) -> None:
    persistence = value(v.get("Persistence Mode"))
    compute = value(v.get("Compute Mode"))
    r.update(persistence_mode=persistence, compute_mode=compute)
    if compute and compute.lower() == "prohibited":
        j.add("compute-prohibited", FAILED, "Compute Mode: Prohibited (no CUDA context can be created)")
    elif compute and compute.lower().startswith("exclusive"):
        j.add("compute-exclusive", INFO, f"Compute Mode: {compute} (one process at a time)")
    if persistence and persistence.lower() == "disabled":
        j.add("persistence-off", INFO, "Persistence Mode: Disabled (each start re-initialises the GPU)")


def _lost_text(v: Mapping[str, str]) -> str | None:
    for val in v.values():
        low = val.lower()
        if any(marker in low for marker in _LOST):
            return val.strip()
    return None


def judge_gpu(index: int, bus_id: str | None, v: Mapping[str, str]) -> GpuHealth:
    """One GPU's block of `section/key -> value` (as `query_blocks` reads it) -> its verdict."""
    j = _Judge()
    r: dict[str, Any] = {}
    _modes(v, j, r)
    _reset(v, j, r, _lost_text(v))
    _ecc(v, j, r)
    _pages(v, j, r)
    _rows(v, j, r)
    busy = _clocks(v, j, r)
    _pcie(v, j, r, busy)
    return GpuHealth(
        index=index,
        bus_id=bus_id,
        name=value(v.get("Product Name")),
        verdict=j.verdict,
        findings=tuple(j.findings),
        unread=tuple(j.unread),
        readings=r,
    )


def parse_topology(text: str | None) -> dict[str, Any] | None:
    """`nvidia-smi topo -m`: {"links": {"GPU0-GPU1": "NV18", ...}}; None when it is not that matrix."""
    if not text:
        return None
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.lstrip().startswith("GPU0")), None)
    if header is None:
        return None
    cols = header.split()  # tabs in the real output, spaces once copied into a web page
    gpus = [c for c in cols if c.startswith("GPU") and c[3:].isdigit()]
    links: dict[str, str] = {}
    for line in lines:
        cells = line.split()
        if not cells or not cells[0].startswith("GPU") or not cells[0][3:].isdigit() or line is header:
            continue
        for name, cell in zip(gpus, cells[1 : 1 + len(gpus)], strict=False):
            if name != cells[0] and cell and cell != "X" and f"{name}-{cells[0]}" not in links:
                links[f"{cells[0]}-{name}"] = cell
    return {"gpus": gpus, "links": links} if gpus else None


def _verdict_of(gpus: tuple[GpuHealth, ...], topology: str | None) -> HealthReport:
    worst = max((_RANK[g.verdict] for g in gpus), default=0)
    verdict = {0: HEALTHY, 1: DEGRADED, 2: FAILED}[worst]
    return HealthReport(verdict, gpus, parse_topology(topology))


def assess(text: str, topology: str | None = None) -> HealthReport:
    """Health of every GPU in one `nvidia-smi -q` or `-q -x` output (and, for several GPUs, `topo -m`)."""
    if text.lstrip("\ufeff \t\r\n").startswith("<"):
        blocks = xml_blocks(text.lstrip("\ufeff"))
        if blocks is None:
            return HealthReport(None, error="not nvidia-smi -q -x output")
        if not blocks:
            return HealthReport(None, error="nvidia-smi -q -x lists no GPU")
        return _verdict_of(tuple(judge_gpu(i, value(bus), v) for i, (bus, v) in enumerate(blocks)), topology)
    lines = unwrap_paste(text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    lowered = text.lower()
    found = query_blocks(lines)
    if found is None or not found[1]:
        lost = next((marker for marker in _LOST if marker in lowered), None)
        if lost is not None:
            line = next(x.strip() for x in lines if lost in x.lower())
            gpu = GpuHealth(0, None, None, FAILED, (Finding("gpu-lost", FAILED, line),))
            return HealthReport(FAILED, (gpu,), parse_topology(topology))
        why = "not nvidia-smi -q output" if found is None else "nvidia-smi -q lists no GPU"
        return HealthReport(None, error=why)
    return _verdict_of(
        tuple(judge_gpu(i, value(b.bus_id), b.values) for i, b in enumerate(found[1])), topology
    )


def worst(verdicts: Sequence[str | None]) -> str | None:
    """The worst of several verdicts (None when none was read)."""
    known = [v for v in verdicts if v in _RANK]
    return max(known, key=lambda v: _RANK[v]) if known else None


def judge_nvml(index: int, name: str | None, readings: Mapping[str, Any]) -> GpuHealth:
    """The same verdict from NVML readings (the gpu-tester's `devices[].telemetry.health`): each
    reading is placed where `nvidia-smi -q` prints it, so one set of rules judges both."""
    values: dict[str, str] = {}

    def put(path: str, reading: Any, text: Any = str) -> None:
        if reading is not None and not isinstance(reading, dict | list):
            values[path] = text(reading)

    def yes(flag: Any) -> str:
        return "Yes" if flag else "No"

    for scope in ("volatile", "aggregate"):
        put(f"ECC Errors/{scope.title()}/Correctable", readings.get(f"ecc_{scope}_corrected"))
        put(f"ECC Errors/{scope.title()}/Uncorrectable", readings.get(f"ecc_{scope}_uncorrected"))
    put("Retired Pages/Pending Page Blacklist", readings.get("retired_pages_pending"), yes)
    put("Remapped Rows/Correctable Error", readings.get("remapped_correctable"))
    put("Remapped Rows/Uncorrectable Error", readings.get("remapped_uncorrectable"))
    put("Remapped Rows/Pending", readings.get("remap_pending"), yes)
    put("Remapped Rows/Remapping Failure Occurred", readings.get("remap_failure"), yes)
    put("PCI/GPU Link Info/PCIe Generation/Max", readings.get("pcie_gen_max"))
    put("PCI/GPU Link Info/PCIe Generation/Current", readings.get("pcie_gen"))
    put("PCI/GPU Link Info/Link Width/Max", readings.get("pcie_width_max"), lambda w: f"{w}x")
    put("PCI/GPU Link Info/Link Width/Current", readings.get("pcie_width"), lambda w: f"{w}x")
    if name:
        values["Product Name"] = name
    return judge_gpu(index, None, values)
