"""What runs inside the emulator's containers: a simulated GPU fleet, or this host's real GPU and tools."""

from __future__ import annotations

from aca_gpu.emulator.workloads.base import (
    Container,
    ContainerSpec,
    ExecNotFound,
    StartFailure,
    Workload,
)

__all__ = ["Container", "ContainerSpec", "ExecNotFound", "StartFailure", "Workload"]
