"""The contract between the emulator's server and what runs inside its emulated containers.

The server starts a container after the simulated image pull, polls its console lines and exit code,
pumps exec processes' pipes to and from the websocket, and stops it on scale-to-zero, delete, execution
end or server stop. A workload decides what the container actually does (simulated GPU or this host).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ContainerSpec:
    """One container of an app or job template, as the server saw it in the ARM resource."""

    name: str  # container name in the template
    image: str
    command: tuple[str, ...]  # entrypoint override (() = image default)
    args: tuple[str, ...]
    env: Mapping[str, str]  # template env vars (name -> value)
    profile_type: str  # workload profile TYPE the app/job runs on, e.g. "Consumption-GPU-NC8as-T4"
    kind: str  # "app" or "job"
    replica: str  # replica name
    # (storage key, mount path, read-only): the environment's Azure Files storages it mounts
    mounts: tuple[tuple[str, str, bool], ...] = ()
    gpu_health: str = ""  # a `gpu` fault's `health=` (ecc, remap, pcie, throttle; `+` joins several)
    # an app with external ingress: the port its container serves on, so its command runs for real
    # (a served model) instead of idling as an explorer does; 0 for every other container
    ingress_port: int = 0
    # the ports its probes look at, besides `ingress_port` (a served replica's own network relays them)
    probe_ports: tuple[int, ...] = ()
    # a served model that loaded on the CPU (the `cpu_fallback` fault): its simulated GPU stays idle
    gpu_idle: bool = False


class StartFailure(Exception):
    """The container cannot start (e.g. the image's CUDA requirement is newer than the host driver)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # system-event Reason, e.g. "ContainerCreateFailure"
        self.message = message  # the runtime's real error text


class ExecNotFound(Exception):
    """An exec `command` is not one executable found in the container's PATH."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message  # text for the ClusterExecFailure error frame


class Container(Protocol):
    def exec(self, command: str) -> subprocess.Popen[bytes]:
        """Spawn a REAL process with stdin/stdout/stderr=PIPE; raises ExecNotFound."""
        ...

    def logs(self, start: int = 0) -> list[str]:
        """Console lines (main process stdout+stderr) from index `start`; thread-safe."""
        ...

    @property
    def exit_code(self) -> int | None:
        """None while the main process runs (an idling explorer never exits)."""
        ...

    @property
    def stopped_code(self) -> int | None:
        """The code the main process gave itself when stopped (a SIGTERM handler), else None."""
        ...

    def stop(self) -> None:
        """Kill the main process and any exec processes; idempotent."""
        ...


class Workload(Protocol):
    kind: str  # "simulated" | "host"
    driver_version: str  # host driver the emulated fleet reports

    def start(self, spec: ContainerSpec, *, time_scale: float) -> Container:
        """Start the container's main process; raises StartFailure.

        `time_scale` multiplies realistic durations (1.0 = real time, 0.01 = 100x faster, 0 = instant).
        """
        ...

    def gpu_name(self, profile_type: str) -> str | None:
        """GPU model name a replica on this profile type sees, or None for a CPU-only profile."""
        ...
