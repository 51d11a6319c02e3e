"""What runs inside the emulator's containers: a simulated GPU fleet, or this host's real GPU and tools."""

from __future__ import annotations

from pathlib import Path

from aca_gpu.emulator.workloads.base import (
    Container,
    ContainerSpec,
    ExecNotFound,
    StartFailure,
    Workload,
)

__all__ = ["Container", "ContainerSpec", "ExecNotFound", "StartFailure", "Workload", "make_workload"]

KINDS = ("simulated", "host")


def make_workload(kind: str, *, driver_version: str | None = None, workdir: Path) -> Workload:
    """Build the workload the server runs containers with; `workdir` holds per-container sandboxes."""
    if kind == "simulated":
        from aca_gpu.emulator.workloads.simulated import SimulatedWorkload

        return SimulatedWorkload(driver_version=driver_version, workdir=workdir)
    if kind == "host":
        from aca_gpu.emulator.workloads.host import HostWorkload

        return HostWorkload(workdir=workdir)
    raise ValueError(f"unknown workload kind {kind!r}; expected one of {', '.join(KINDS)}")
