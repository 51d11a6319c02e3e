"""The GPU knowledge workflows use (profiles, nvidia-smi, CUDA compat, tester result, cost), in one place.

Workflows speak typed records; this module gathers the few calls into aca_gpu.gpu.* and
aca_gpu.cost that they share, so the orchestration reads as orchestration.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aca_gpu import cost, tester
from aca_gpu.errors import BadInput
from aca_gpu.gpu import profiles
from aca_gpu.models import ContainerDef

if TYPE_CHECKING:  # NVIDIA's tables load with the first verdict, not with every command that names a GPU
    from aca_gpu.gpu import cuda_compat
    from aca_gpu.gpu.image_ref import ImageRef

Profile = profiles.GpuProfile


RESULT_MARKER = "ACAGPU_RESULT"
SMI_QUERY = ("nvidia-smi", "--query-gpu=name,driver_version,memory.total,uuid", "--format=csv")


def resolve_profile(alias: str) -> Profile:
    return profiles.resolve_profile(alias)


def profile_dict(profile: Profile, alias: str) -> dict[str, Any]:
    return {
        "alias": alias,
        "type": profile.type,
        "gpu": profile.gpu,
        "gpu_count": profile.gpu_count,
        "cpu": profile.container_cpu,
        "memory": memory_text(profile),
        "serverless": profile.serverless,
    }


def memory_text(profile: Profile) -> str:
    return f"{profile.container_memory_gib}Gi"


def explorer_container(image: str, profile: Profile, max_minutes: int) -> ContainerDef:
    """The CUDA explorer idles for at most the run's deadline, so a forgotten run stops by itself."""
    return ContainerDef(
        name="cuda-explorer",
        image=image,
        cpu=float(profile.container_cpu),
        memory=memory_text(profile),
        command=("/bin/sh", "-c", f"sleep {max_minutes * 60}"),
    )


def default_tester_image() -> str:
    return tester.DEFAULT_TESTER_IMAGE


def tester_container(image: str, profile: Profile) -> ContainerDef:
    """The zero-build tester: the tester script injected into a stock PyTorch image."""
    spec = tester.zero_build_container(image)
    return ContainerDef(
        name="gpu-tester",
        image=image,
        cpu=float(profile.container_cpu),
        memory=memory_text(profile),
        command=tuple(spec.command),
        args=tuple(spec.args),
        env=dict(spec.env),
    )


def compat_verdict(image: ImageRef | str, driver_version: str | None) -> cuda_compat.CompatVerdict | None:
    """An image's CUDA requirement against the driver nvidia-smi reported (None without a driver)."""
    if not driver_version:
        return None
    from aca_gpu.gpu import cuda_compat
    from aca_gpu.gpu.image_ref import parse_image_ref

    try:
        ref = parse_image_ref(image) if isinstance(image, str) else image
        result = cuda_compat.verdict(ref, driver_version)
    except BadInput:
        return None
    return replace(result, image=str(image).strip()) if isinstance(image, str) else result


def cost_estimate(profile: Profile, replica_seconds: float, location: str, *, label: str) -> dict[str, Any]:
    """List-price estimate for `replica_seconds` of GPU replicas (each replica holds one profile's GPUs)."""
    est = cost.estimate(profile, replica_seconds, location=location)
    return {
        "gpu_seconds": round(float(est.gpu_seconds), 3),  # as measured; text shows tenths
        # not rounded to the printed digits: units.usd_text is the one rounding, so an amount above
        # zero never reads `$0.00`
        "usd_estimate": round(float(est.usd), 8),
        "basis": f"{label}; {est.basis}",
    }
