"""The `--gpus` request, parsed once and spelled for each runtime: `all`, a count, `device=0,2`, `none`.

Docker takes the same words (`--gpus all`, `--gpus 2`, `--gpus '"device=0,2"'`); Podman names CDI
devices (`nvidia.com/gpu=all`, `nvidia.com/gpu=0`); Apptainer's `--nv` passes every GPU the node has
and CUDA_VISIBLE_DEVICES narrows them; Slurm only counts (`--gres=gpu:N`).
"""

from __future__ import annotations

from dataclasses import dataclass

from aca_gpu.errors import BadInput

CDI_KIND = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuRequest:
    """all GPUs, the first `count`, the listed `devices`, or none (`count == 0`)."""

    all: bool = False
    count: int | None = None
    devices: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return not self.all and not self.devices and self.count == 0

    def __str__(self) -> str:
        if self.all:
            return "all"
        if self.devices:
            return "device=" + ",".join(self.devices)
        return "none" if self.none else str(self.count)

    def indices(self) -> list[str]:
        """Device indices when the request names or counts them (empty for all/none)."""
        if self.devices:
            return list(self.devices)
        return [str(i) for i in range(self.count or 0)]

    def docker_args(self) -> list[str]:
        if self.none:
            return []
        if self.devices:
            # the docker CLI reads the value as CSV: the quotes keep `device=0,2` one field
            return ["--gpus", f'"device={",".join(self.devices)}"']
        return ["--gpus", "all" if self.all else str(self.count)]

    def cdi_devices(self) -> list[str]:
        if self.none:
            return []
        if self.all:
            return [f"{CDI_KIND}=all"]
        return [f"{CDI_KIND}={i}" for i in self.indices()]

    def visible_devices(self) -> str | None:
        """The NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES value, None for no GPU."""
        if self.none:
            return None
        return "all" if self.all else ",".join(self.indices())

    def slurm_count(self) -> int:
        """How many GPUs to ask Slurm for: it allocates by count, never by index."""
        if self.devices:
            return len(self.devices)
        return 1 if self.all else max(self.count or 1, 1)


def parse_gpus(value: str) -> GpuRequest:
    """`all` · `N` (1-64) · `device=0,2` (also quoted, as docker users type it) · `none`."""
    text = value.strip().strip("'\"").strip()
    if not text:
        raise BadInput("--gpus must not be empty: all, a count (e.g. 2), device=0,2 or none")
    if text == "all":
        return GpuRequest(all=True)
    if text in ("none", "0"):
        return GpuRequest(count=0)
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= 64:
            raise BadInput(f"--gpus count must be between 1 and 64, got {count}")
        return GpuRequest(count=count)
    if text.startswith("device="):
        items = [item.strip() for item in text[len("device=") :].split(",")]
        if not items or not all(item.isdigit() for item in items):
            raise BadInput(f"--gpus {value!r}: device= takes GPU indices, e.g. device=0,2")
        if len(set(items)) != len(items):
            raise BadInput(f"--gpus {value!r} names a device twice")
        return GpuRequest(devices=tuple(items))
    raise BadInput(f"--gpus {value!r} is not all, a count (e.g. 2), device=0,2 or none")
