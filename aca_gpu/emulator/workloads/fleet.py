"""The emulated GPU fleet: which GPUs a replica on each workload profile sees, and how NVML reports them.

Profile -> GPU model and count come from the tool's own catalog (`aca_gpu.gpu.profiles`), so the
emulator and the CLI agree on what a profile carries. Per-model facts (memory as the driver reports it,
power cap, idle draw, clocks, PCI ids) are what those parts print on R5xx drivers.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import dataclass

from aca_gpu.emulator.workloads.smi_render import SmiGpu
from aca_gpu.gpu.profiles import GpuProfile, profile_catalog

# ACA does not publish its GPU hosts' driver (Microsoft's serverless GPU docs name none). A 2024
# ACA walkthrough showed 535.54.03 (CUDA 12.2) on the A100 fleet; Azure's data-center images track NVIDIA's
# production branches, and R550 (CUDA 12.4) is the conservative current pick: new enough for
# cu121/cu124 PyTorch wheels, old enough that CUDA 12.8+/13.x images fail the runtime's requirement
# check, which is exactly the failure the tool has to explain. Override with --driver-version.
DEFAULT_DRIVER = "550.144.03"


@dataclass(frozen=True)
class GpuModel:
    """How NVML reports one GPU model; the values an idle part shows in the table."""

    name: str
    architecture: str
    compute_cap: str
    memory_total_mib: int
    memory_reserved_mib: int
    memory_used_mib: int
    power_limit_w: int
    idle_power_w: float
    idle_temp_c: int
    pstate: str
    mig_capable: bool
    device_id: str
    sm_count: int
    l2_mib: float
    clock_max_sm_mhz: int
    clock_max_mem_mhz: int
    pcie_h2d_gbps: float  # pinned host->device copies the part's PCIe link reaches


MODELS: dict[str, GpuModel] = {
    "Tesla T4": GpuModel(
        name="Tesla T4",
        architecture="Turing",
        compute_cap="7.5",
        memory_total_mib=15360,
        memory_reserved_mib=257,
        memory_used_mib=1,
        power_limit_w=70,
        idle_power_w=9.6,
        idle_temp_c=31,
        pstate="P8",
        mig_capable=False,
        device_id="0x1EB810DE",
        sm_count=40,
        l2_mib=4.0,
        clock_max_sm_mhz=1590,
        clock_max_mem_mhz=5001,
        pcie_h2d_gbps=12.3,
    ),
    "NVIDIA A100 80GB PCIe": GpuModel(
        name="NVIDIA A100 80GB PCIe",
        architecture="Ampere",
        compute_cap="8.0",
        memory_total_mib=81920,
        memory_reserved_mib=555,
        memory_used_mib=4,
        power_limit_w=300,
        idle_power_w=40.4,
        idle_temp_c=28,
        pstate="P0",
        mig_capable=True,
        device_id="0x20B510DE",
        sm_count=108,
        l2_mib=40.0,
        clock_max_sm_mhz=1410,
        clock_max_mem_mhz=1512,
        pcie_h2d_gbps=24.6,
    ),
}


def profile_for(profile_type: str) -> GpuProfile | None:
    """The catalog entry for a workload profile type; None for CPU-only types such as `Consumption`."""
    wanted = profile_type.strip().lower()
    return next((p for p in profile_catalog() if p.type.lower() == wanted), None)


def _uuid(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()[:16]
    return f"GPU-{uuidlib.UUID(bytes=digest)}"


def gpus_for(profile_type: str, replica: str) -> tuple[SmiGpu, ...]:
    """The GPUs a replica on this profile sees (none on a CPU-only profile).

    Azure attaches each GPU on its own Hyper-V PCI domain (00000001:00:00.0, 00000002:00:00.0, ...);
    UUIDs are stable per replica so repeated nvidia-smi calls agree.
    """
    profile = profile_for(profile_type)
    if profile is None or profile.gpu not in MODELS:
        return ()
    model = MODELS[profile.gpu]
    return tuple(
        SmiGpu(
            index=i,
            name=model.name,
            uuid=_uuid(f"{replica}/{i}"),
            bus_id=f"{i + 1:08X}:00:00.0",
            memory_total_mib=model.memory_total_mib,
            memory_reserved_mib=model.memory_reserved_mib,
            memory_used_mib=model.memory_used_mib,
            compute_cap=model.compute_cap,
            architecture=model.architecture,
            power_limit_w=model.power_limit_w,
            power_draw_w=model.idle_power_w + 0.7 * i,
            temperature_c=model.idle_temp_c + i % 3,
            device_id=model.device_id,
            pstate=model.pstate,
            persistence=True,
            mig_mode="Disabled" if model.mig_capable else "N/A",
            clock_sm_mhz=300 if model.pstate == "P8" else model.clock_max_sm_mhz,
            clock_max_sm_mhz=model.clock_max_sm_mhz,
            clock_mem_mhz=405 if model.pstate == "P8" else model.clock_max_mem_mhz,
            clock_max_mem_mhz=model.clock_max_mem_mhz,
        )
        for i in range(profile.gpu_count)
    )
