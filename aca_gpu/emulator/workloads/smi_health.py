"""The health sections of `nvidia-smi -q` for a simulated GPU, and the `gpu` fault that spoils them.

Layouts follow real outputs (tests/fixtures/nvidia_smi 90-95): R535+ `Clocks Event Reasons`, older
`Clocks Throttle Reasons`; R580 `GPU Recovery Action` where R535-R575 print `GPU Reset Status`;
remapped rows on Ampere and newer, retired pages before.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aca_gpu.emulator.workloads.cuda_versions import driver_major

if TYPE_CHECKING:
    from aca_gpu.emulator.workloads.smi_render import SmiGpu

_REASON_NAMES = (
    ("Idle", 1),
    ("Applications Clocks Setting", 1),
    ("SW Power Cap", 1),
    ("HW Slowdown", 1),
    ("HW Thermal Slowdown", 2),
    ("HW Power Brake Slowdown", 2),
    ("Sync Boost", 1),
    ("SW Thermal Slowdown", 1),
    ("Display Clock Setting", 1),
)
_ROW_REMAPPING = ("Ampere", "Hopper", "Ada Lovelace", "Blackwell")


def health_sections(g: SmiGpu, driver: str, kv: Any) -> dict[str, list[str]]:
    """The health sections of one GPU's -q block, keyed by where they go: the driver branch decides
    the names (R535 renamed throttle reasons to event reasons; R580 replaced the reset status with
    the recovery action); the architecture decides retired pages (pre-Ampere) or remapped rows."""
    major = driver_major(driver)
    idle = g.util_pct == 0 and not g.clock_reasons
    reasons = [kv(1, "Clocks Event Reasons" if major >= 535 else "Clocks Throttle Reasons")]
    for name, depth in _REASON_NAMES:
        on = name in g.clock_reasons or (name == "Idle" and idle)
        reasons.append(kv(1 + depth, name, "Active" if on else "Not Active"))
    reset = (
        [kv(1, "GPU Recovery Action", "None")]
        if major >= 580
        else [
            kv(1, "GPU Reset Status"),
            kv(2, "Reset Required", "No"),
            kv(2, "Drain and Reset Recommended", "No"),
        ]
    )
    link = [
        kv(2, "GPU Link Info"),
        kv(3, "PCIe Generation"),
        kv(4, "Max", g.pcie_gen_max),
        kv(4, "Current", g.pcie_gen),
        kv(3, "Link Width"),
        kv(4, "Max", f"{g.pcie_width_max}x"),
        kv(4, "Current", f"{g.pcie_width}x"),
    ]
    remaps = g.architecture in _ROW_REMAPPING
    ecc = [kv(1, "ECC Mode"), kv(2, "Current", "Enabled"), kv(2, "Pending", "Enabled"), kv(1, "ECC Errors")]
    for scope in ("Volatile", "Aggregate"):
        ecc += [
            kv(2, scope),
            kv(3, "SRAM Correctable", 0),
            kv(3, "SRAM Uncorrectable", 0),
            kv(3, "DRAM Correctable", g.ecc_volatile_corrected),
            kv(3, "DRAM Uncorrectable", g.ecc_volatile_uncorrected),
        ]
    pages = "N/A" if remaps else 0
    ecc += [
        kv(1, "Retired Pages"),
        kv(2, "Single Bit ECC", pages),
        kv(2, "Double Bit ECC", pages),
        kv(2, "Pending Page Blacklist", "N/A" if remaps else ("Yes" if g.pages_pending else "No")),
    ]
    if remaps:
        ecc += [
            kv(1, "Remapped Rows"),
            kv(2, "Correctable Error", 0),
            kv(2, "Uncorrectable Error", g.remapped_uncorrectable),
            kv(2, "Pending", "Yes" if g.remap_pending else "No"),
            kv(2, "Remapping Failure Occurred", "Yes" if g.remap_failure else "No"),
        ]
    else:
        ecc.append(kv(1, "Remapped Rows", "N/A"))
    return {"reset": reset, "link": link, "reasons": reasons, "ecc": ecc}


def sicken(gpus: tuple[SmiGpu, ...], health: str) -> tuple[SmiGpu, ...]:
    """The GPUs as a `gpu:health=...` fault leaves them (`+` joins several kinds)."""
    kinds = [k.strip().lower() for k in health.split("+") if k.strip()]
    out = []
    for g in gpus:
        remaps = g.architecture in _ROW_REMAPPING
        for kind in kinds:
            if kind == "ecc":
                g = replace(g, ecc_volatile_uncorrected=2, ecc_volatile_corrected=14, ecc_errors="2")
            elif kind == "remap":
                g = (
                    replace(g, remap_failure=True, remapped_uncorrectable=8)
                    if remaps
                    else replace(g, pages_pending=True)
                )
            elif kind == "pcie":
                g = replace(g, pcie_width=g.pcie_width_max // 2)
            elif kind == "throttle":
                reasons = ("HW Slowdown", "HW Thermal Slowdown")
                g = replace(g, clock_reasons=reasons, clock_sm_mhz=g.clock_max_sm_mhz // 3)
        out.append(g)
    return tuple(out)
