"""The driver's CUDA level, and whether the NVIDIA runtime lets a container's image start on it.

Thin glue over `aca_gpu.gpu.cuda_compat` / `cuda_require`, so the emulator refuses exactly the images
the tool's own compatibility verdict says the runtime refuses, with the runtime's own words.
"""

from __future__ import annotations

from collections.abc import Mapping

from aca_gpu.errors import BadInput
from aca_gpu.gpu import cuda_compat
from aca_gpu.gpu.cuda_require import HostFacts, Requirement, evaluate, parse_require
from aca_gpu.gpu.image_ref import parse_image_ref

_TRUE = {"1", "t", "true", "yes", "y", "on"}

# How containerd reports the failed prestart hook (Docker 24+/containerd, legacy mode), before the
# nvidia-container-cli line itself.
_HOOK_PREFIX = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: "
    "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
    "Auto-detected mode as 'legacy'\n"
)


def driver_major(driver_version: str) -> int:
    head = driver_version.split(".")[0]
    return int(head) if head.isdigit() else 0


def max_cuda_for_driver(driver_version: str) -> str | None:
    """Highest CUDA version the driver supports natively, e.g. "12.4" for 550.144.03."""
    try:
        return cuda_compat.max_cuda_for_driver(driver_version)
    except BadInput:
        return None


def image_requirements(image: str, env: Mapping[str, str]) -> list[Requirement]:
    """The `NVIDIA_REQUIRE_*` constraints the NVIDIA runtime would check for this container.

    The emulator sees no image config, so an `nvidia/cuda:<x.y.z>-...` tag stands for a requirement of
    `cuda>=x.y` (what the toolkit synthesises for an image with CUDA_VERSION but no explicit
    requirement); `NVIDIA_REQUIRE_*` template env vars replace that, `NVIDIA_DISABLE_REQUIRE` skips all.
    """
    if env.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() in _TRUE:
        return []
    texts = [v for k, v in sorted(env.items()) if k.startswith("NVIDIA_REQUIRE_") and v.strip()]
    if "NVIDIA_REQUIRE_CUDA" not in env:
        try:
            ref = parse_image_ref(image)
        except BadInput:
            ref = None
        if ref is not None and ref.is_nvidia_cuda and ref.cuda_version:
            major, minor = ref.cuda_version.split(".")[:2]
            texts.insert(0, f"cuda>={major}.{minor}")
    reqs = []
    for text in texts:
        try:
            reqs.append(parse_require(text))
        except BadInput:
            continue  # the runtime rejects malformed constraints differently; not modelled
    return reqs


def start_failure(image: str, env: Mapping[str, str], *, driver: str, brand: str | None) -> str | None:
    """The runtime's error text when the image may not start on this driver, else None."""
    reqs = image_requirements(image, env)
    if not reqs:
        return None
    facts = HostFacts(cuda=max_cuda_for_driver(driver), driver=driver, brand=brand)
    passed, failing = evaluate(reqs, facts)
    if passed or failing is None:
        return None
    return f"{_HOOK_PREFIX}{failing.failure_message()}: unknown"
