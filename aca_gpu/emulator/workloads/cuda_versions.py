"""Which CUDA version a driver supports, and whether an image's CUDA requirement lets it start.

Prefers `aca_gpu.gpu.cuda_compat` when it provides `max_cuda_for_driver`; the branch table below is the
fallback (NVIDIA's "CUDA Toolkit and Corresponding Driver Versions": the CUDA level a branch's libcuda
reports in the nvidia-smi banner).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_BRANCH_CUDA: tuple[tuple[int, str], ...] = (
    (595, "13.2"),
    (590, "13.1"),
    (580, "13.0"),
    (575, "12.9"),
    (570, "12.8"),
    (565, "12.7"),
    (560, "12.6"),
    (555, "12.5"),
    (550, "12.4"),
    (545, "12.3"),
    (535, "12.2"),
    (530, "12.1"),
    (525, "12.0"),
    (520, "11.8"),
    (515, "11.7"),
    (510, "11.6"),
    (495, "11.5"),
    (470, "11.4"),
    (465, "11.3"),
    (460, "11.2"),
    (455, "11.1"),
    (450, "11.0"),
)


def driver_major(driver_version: str) -> int:
    head = driver_version.split(".")[0]
    return int(head) if head.isdigit() else 0


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def max_cuda_for_driver(driver_version: str) -> str | None:
    """Highest CUDA version the driver's user-mode library supports, e.g. "12.4" for 550.144.03."""
    try:
        from aca_gpu.gpu import cuda_compat
    except ImportError:
        cuda_compat = None  # type: ignore[assignment]
    shared = getattr(cuda_compat, "max_cuda_for_driver", None)
    if shared is not None:
        try:
            value = shared(driver_version)
        except (ValueError, TypeError):
            value = None
        if value is not None:
            return str(value)
    major = driver_major(driver_version)
    for branch, cuda in _BRANCH_CUDA:
        if major >= branch:
            return cuda
    return None


_CUDA_TAG = re.compile(r"(?:^|/)nvidia/cuda:(\d+\.\d+)(?:\.\d+)?(?:-|$)")
_TRUE = {"1", "t", "true", "yes", "y", "on"}


def image_requirements(image: str, env: Mapping[str, str]) -> list[str]:
    """The `NVIDIA_REQUIRE_*` constraints the NVIDIA runtime would check for this container.

    The emulator has no image config, so an `nvidia/cuda:<x.y>...` tag stands in for its CUDA_VERSION
    (the runtime synthesises `cuda>=x.y` for such "legacy" images); template env vars add to it.
    """
    if env.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() in _TRUE:
        return []
    reqs = [v for k, v in sorted(env.items()) if k.startswith("NVIDIA_REQUIRE_") and v.strip()]
    if not any(k == "NVIDIA_REQUIRE_CUDA" for k in env):
        match = _CUDA_TAG.search(image)
        if match:
            reqs.insert(0, f"cuda>={match.group(1)}")
    return reqs


def _condition_holds(cond: str, facts: Mapping[str, str]) -> bool:
    match = re.fullmatch(r"\s*([A-Za-z]+)\s*(>=|<=|!=|=|<|>)\s*(\S+)\s*", cond)
    if not match:
        return False
    prop, op, want = match.group(1).lower(), match.group(2), match.group(3)
    have = facts.get(prop)
    if have is None:
        return prop == "cuda"  # an undeterminable CUDA level counts as satisfied
    if prop == "brand":
        same = have.lower() == want.lower()
        return same if op == "=" else (not same if op == "!=" else False)
    a, b = _version_tuple(have), _version_tuple(want)
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def unsatisfied_requirement(requirements: list[str], facts: Mapping[str, str]) -> str | None:
    """The first requirement that fails (terms ORed, conditions ANDed), or None when all pass."""
    for req in requirements:
        terms = req.split()
        if not any(all(_condition_holds(c, facts) for c in term.split(",")) for term in terms):
            return req
    return None


def requirement_error(requirement: str) -> str:
    """nvidia-container-cli's error for a failed requirement, as containerd reports the failed hook."""
    token = requirement.split()[0]
    detail = f"unsatisfied condition: {token}"
    if token.lower().startswith("cuda>="):
        detail += ", please update your driver to a newer version, or use an earlier cuda container"
    return (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
        "runc create failed: unable to start container process: error during container init: "
        "error running hook #0: "
        "error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
        f"nvidia-container-cli: requirement error: {detail}: unknown"
    )
