"""Will a CUDA image run on a host driver? Verdicts from NVIDIA's driver tables (cuda_releases.py).

Two independent questions, answered together:
- the toolkit question (release notes): `ok` when the driver natively supports the image's CUDA
  release, `minor-compat` when it only meets the major's minor-version-compatibility floor (most code
  runs; PTX JIT and calls needing a newer driver fail), `incompatible` below that, `unknown` when the
  image does not reveal its CUDA version;
- the container runtime question: would `NVIDIA_REQUIRE_CUDA` stop the container before it starts
  (`pass`/`fail`/`n/a`)? nvidia/cuda images without an explicit requirement are modelled as
  declaring `cuda>=X.Y` for their tag's version, as the toolkit does for such images.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from aca_gpu.errors import BadInput
from aca_gpu.gpu.cuda_releases import MINOR_COMPAT_FLOOR, RELEASES, CudaRelease
from aca_gpu.gpu.cuda_require import HostFacts, Requirement, evaluate, parse_require, version_tuple
from aca_gpu.gpu.image_ref import ImageRef

Verdict = Literal["ok", "minor-compat", "incompatible", "unknown"]
RequireCheck = Literal["pass", "fail", "n/a"]
Platform = Literal["linux", "windows"]

_DRIVER = re.compile(r"\d{2,4}(?:\.\d{1,3}){0,2}")
_CUDA = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA driver version, ordered numerically per component (`535.104.05` > `535.54.03`)."""

    parts: tuple[int, ...]
    text: str

    def __str__(self) -> str:
        return self.text

    @property
    def branch(self) -> int:
        return self.parts[0]


def parse_driver_version(text: str) -> DriverVersion:
    """Accept `535.104.05`, `550.120`, `610`; anything else raises BadInput."""
    cleaned = text.strip()
    if not _DRIVER.fullmatch(cleaned):
        raise BadInput(f"invalid driver version {text!r} (expected e.g. 535.104.05)")
    return DriverVersion(tuple(int(p) for p in cleaned.split(".")), cleaned)


def _driver(value: str | DriverVersion) -> DriverVersion:
    return value if isinstance(value, DriverVersion) else parse_driver_version(value)


def _cuda_parts(cuda: str) -> tuple[int, int, int | None]:
    m = _CUDA.fullmatch(cuda.strip())
    if not m:
        raise BadInput(f"invalid CUDA version {cuda!r} (expected e.g. 12.4 or 12.4.1)")
    return int(m.group(1)), int(m.group(2)), (int(m.group(3)) if m.group(3) is not None else None)


def _at_least(driver: DriverVersion, minimum: str) -> bool:
    return version_tuple(driver.text) >= version_tuple(minimum)


def release_for_cuda(cuda: str) -> CudaRelease | None:
    """The table row for a toolkit version: exact x.y.z, else the newest known update of x.y not above it.

    `12.4` (no patch) means the GA release, the least any 12.4 build needs. A 12.3.2 image maps to the
    12.3 Update 1 row, the newest NVIDIA lists for 12.3. Unknown minors (12.7, 14.0) give None.
    """
    major, minor, patch = _cuda_parts(cuda)
    same_minor = [r for r in RELEASES if _cuda_parts(r.version)[:2] == (major, minor)]
    if not same_minor:
        return None
    wanted = patch or 0
    fitting = [r for r in same_minor if (_cuda_parts(r.version)[2] or 0) <= wanted]
    if fitting:
        return max(fitting, key=lambda r: _cuda_parts(r.version)[2] or 0)
    return min(same_minor, key=lambda r: _cuda_parts(r.version)[2] or 0)


def min_driver_for_cuda(cuda: str, platform: Platform = "linux") -> str | None:
    """Minimum driver that runs this toolkit natively (Linux x86_64 unless asked); None if unknown."""
    release = release_for_cuda(cuda)
    if release is None:
        return None
    return release.linux if platform == "linux" else release.windows


def minor_compat_floor(major: int, platform: Platform = "linux") -> str | None:
    linux, windows = MINOR_COMPAT_FLOOR.get(major, (None, None))
    return linux if platform == "linux" else windows


def max_cuda_for_driver(driver: str | DriverVersion, platform: Platform = "linux") -> str | None:
    """Newest toolkit (major.minor) the driver runs natively, i.e. what nvidia-smi prints as CUDA Version.

    None when the driver predates every release in the table (older than CUDA 10.0).
    """
    drv = _driver(driver)
    best: tuple[int, int] | None = None
    for release in RELEASES:
        minimum = release.linux if platform == "linux" else release.windows
        if minimum is None or not _at_least(drv, minimum):
            continue
        major, minor, _ = _cuda_parts(release.version)
        if best is None or (major, minor) > best:
            best = (major, minor)
    return f"{best[0]}.{best[1]}" if best else None


@dataclass(frozen=True)
class CompatVerdict:
    image: str | None
    cuda_version: str | None
    driver_version: str
    verdict: Verdict
    min_driver: str | None
    require_check: RequireCheck
    reason: str
    max_cuda: str | None = None  # newest toolkit the driver runs natively
    require: str | None = None  # the requirement evaluated (explicit or modelled from the tag)

    @property
    def ok(self) -> bool:
        """The one pass/fail rule (`compat`, `up`, `validate` alike): `incompatible`, or a container
        runtime that would refuse the image, fails. `minor-compat` passes: the container starts and
        most code runs under minor-version compatibility (PTX JIT and the newest APIs do not), so the
        verdict says so and the tester shows whether the GPU really works."""
        return self.verdict != "incompatible" and self.require_check != "fail"

    def as_dict(self) -> dict[str, str | None]:
        """The documented JSON contract of `acagpu compat` (exactly these keys)."""
        return {
            "image": self.image,
            "cuda_version": self.cuda_version,
            "driver_version": self.driver_version,
            "verdict": self.verdict,
            "min_driver": self.min_driver,
            "require_check": self.require_check,
            "reason": self.reason,
        }


def _toolkit_verdict(cuda: str, drv: DriverVersion, platform: Platform) -> tuple[Verdict, str | None, str]:
    major, minor, _ = _cuda_parts(cuda)
    release = release_for_cuda(cuda)
    minimum = None
    if release is not None:
        minimum = release.linux if platform == "linux" else release.windows
    floor = minor_compat_floor(major, platform)
    if minimum is not None and _at_least(drv, minimum):
        branch = (
            " (driver branch only; NVIDIA lists no exact version)" if release and release.branch_only else ""
        )
        return "ok", minimum, f"driver {drv} supports CUDA {cuda} natively (needs >= {minimum}{branch})"
    if minimum is None:
        max_cuda = max_cuda_for_driver(drv, platform)
        if max_cuda is not None and version_tuple(max_cuda) >= version_tuple(f"{major}.{minor}"):
            return "ok", None, f"CUDA {cuda} is not in NVIDIA's table; driver {drv} runs CUDA {max_cuda}"
    need = f"needs >= {minimum}" if minimum else f"CUDA {major}.{minor} is not in NVIDIA's driver table"
    if floor is not None and _at_least(drv, floor):
        return (
            "minor-compat",
            minimum,
            f"driver {drv} is below CUDA {cuda}'s minimum ({need}) but meets the CUDA {major}.x "
            f"minor-version-compatibility floor {floor}: most code runs; "
            "PTX JIT and newer-driver features fail",
        )
    floor_note = (
        f"; CUDA {major}.x floor is {floor}"
        if floor
        else f"; CUDA {major}.x has no minor-version compatibility"
    )
    return "incompatible", minimum, f"driver {drv} is too old for CUDA {cuda} ({need}{floor_note})"


def _requirements(
    image: ImageRef | None, cuda: str | None, require: str | list[str] | None
) -> list[Requirement]:
    if require:
        texts = [require] if isinstance(require, str) else list(require)
        return [parse_require(t) for t in texts if t.strip()]
    if image is not None and image.is_nvidia_cuda and cuda:
        major, minor, _ = _cuda_parts(cuda)
        return [parse_require(f"cuda>={major}.{minor}")]
    return []


def verdict(
    image_or_cuda: ImageRef | str | None,
    driver: str | DriverVersion,
    require: str | list[str] | None = None,
    *,
    brand: str | None = None,
    platform: Platform = "linux",
) -> CompatVerdict:
    """Judge an image (or a bare CUDA version like `12.4.1`) against a host driver.

    `require` is the image's NVIDIA_REQUIRE_CUDA value(s) when known (e.g. read from the image config).
    `brand` is the GPU's NVML brand; None treats brand conditions as met, which is right for the
    data-center GPUs ACA offers because NVIDIA's images list both `tesla` and `nvidia` brands.
    """
    drv = _driver(driver)
    image: ImageRef | None = image_or_cuda if isinstance(image_or_cuda, ImageRef) else None
    cuda = (
        image.cuda_version
        if image is not None
        else (image_or_cuda if isinstance(image_or_cuda, str) else None)
    )
    if cuda is not None:
        _cuda_parts(cuda)  # validates a bare version early
    max_cuda = max_cuda_for_driver(drv, platform)
    what: Verdict
    if cuda is None:
        what, minimum = "unknown", None
        reason = "the image tag does not reveal its CUDA version"
    else:
        what, minimum, reason = _toolkit_verdict(cuda, drv, platform)
    reqs = _requirements(image, cuda, require)
    check: RequireCheck = "n/a"
    req_text = " & ".join(r.text for r in reqs) or None
    if reqs:
        facts = HostFacts(cuda=max_cuda or "0", driver=drv.text, brand=brand)
        passed, failing = evaluate(reqs, facts)
        check = "pass" if passed else "fail"
        if failing is not None:
            reason += f"; the container runtime would refuse to start it ({failing.failure_message()})"
        elif any(
            r.passing_term(HostFacts(cuda=max_cuda or "0", driver=drv.text, brand="-")) is None for r in reqs
        ):
            reason += (
                "; NVIDIA_REQUIRE_CUDA passes only through a brand/driver-branch term (forward compatibility)"
            )
    if max_cuda:
        reason += f"; driver runs up to CUDA {max_cuda} natively"
    label = str(image_or_cuda) if image_or_cuda is not None else None
    return CompatVerdict(label, cuda, drv.text, what, minimum, check, reason, max_cuda, req_text)
