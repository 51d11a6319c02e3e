"""The explorer probe and the zero-build gpu-tester as real container runs on a local runtime.

The probe runs `nvidia-smi` in the explorer image (the GPU runtime mounts nvidia-smi with the
driver, as on Azure), then `nvidia-smi -q` in a second container of the same image for the GPUs'
health (two runs, not a shell line joining them: an image need not have a shell, and the runtime's
own refusal text stays what judges a GPU that never reached the container). The tester runs the
packaged script in the tester image through the same zero-build injection as on Azure
(`aca_gpu.tester.zero_build_container`). All return plain `ContainerRun` records; judging them is
the workflow's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aca_gpu.local.commands import ContainerCommand, container_command
from aca_gpu.local.gpus import GpuRequest
from aca_gpu.local.runner import ContainerRun, run_container
from aca_gpu.tester import zero_build_container

PROBE_COMMAND = ("nvidia-smi",)
HEALTH_COMMAND = ("nvidia-smi", "-q")


@dataclass(frozen=True)
class LocalTarget:
    """Where and how containers run: the runtime, its binary, the GPUs, Podman's GPU mode, a SIF."""

    runtime: str
    binary: str
    gpus: GpuRequest
    podman_gpu: str = "cdi"
    sif: str | None = None
    run_id: str = "local"

    def command(
        self, image: str, argv: Sequence[str], *, role: str, env: dict[str, str] | None = None
    ) -> ContainerCommand:
        return container_command(
            self.runtime,
            image,
            argv,
            gpus=self.gpus,
            env=env,
            binary=self.binary,
            name=f"acagpu-{self.run_id}-{role}",
            podman_gpu=self.podman_gpu,
            sif=self.sif,
        )


def probe_command(target: LocalTarget, image: str) -> ContainerCommand:
    return target.command(image, PROBE_COMMAND, role="explorer")


def health_command(target: LocalTarget, image: str) -> ContainerCommand:
    """`nvidia-smi -q` in the explorer image, in a container of its own name (the table's may still
    be being removed)."""
    return target.command(image, HEALTH_COMMAND, role="explorer-health")


def tester_command(target: LocalTarget, image: str, args: Sequence[str] = ()) -> ContainerCommand:
    spec = zero_build_container(image, args)
    tester = LocalTarget(target.runtime, target.binary, target.gpus, target.podman_gpu, None, target.run_id)
    return tester.command(spec.image, [*spec.command, *spec.args], role="tester", env=spec.env)


def run_probe(target: LocalTarget, image: str, timeout: float = 600.0) -> ContainerRun:
    """nvidia-smi in `image` (the deadline covers a first image pull)."""
    return run_container(probe_command(target, image), timeout)


def run_tester(
    target: LocalTarget, image: str, args: Sequence[str] = (), timeout: float = 1800.0
) -> ContainerRun:
    """The gpu-tester in `image`, zero-build; its stdout carries the result JSON."""
    return run_container(tester_command(target, image, args), timeout)
