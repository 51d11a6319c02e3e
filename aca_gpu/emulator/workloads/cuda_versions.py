"""The driver's CUDA level, and whether the NVIDIA container runtime lets a container's image start on it.

The emulator's own model of the runtime, written from NVIDIA's sources and kept apart from the client's
compatibility code on purpose: a wrong client verdict must not be mirrored here, or no test could see it.

Modelled (nvidia-container-toolkit's prestart hook in legacy mode, then `nvidia-container-cli configure`):

- The container's environment is the image's overlaid with the container's own. Every variable named
  `NVIDIA_REQUIRE_*` except `NVIDIA_REQUIRE_JETPACK*` is one requirement, empty ones included. An image
  with a non-empty `CUDA_VERSION` and an empty or missing `NVIDIA_REQUIRE_CUDA` ("legacy image") also
  gets `cuda>=<major.minor of CUDA_VERSION>`, appended last. `NVIDIA_DISABLE_REQUIRE` skips every check
  when Go's `strconv.ParseBool` reads it as true (`1`, `t`, `T`, `TRUE`, `true`, `True`; nothing else).
- One requirement (libnvidia-container `dsl.c`): terms separated by single spaces are alternatives (OR),
  comma-separated conditions inside a term must all hold (AND), and every requirement must hold. A
  condition is `<property><op><value>`; the property is `cuda`, `driver`, `arch` or `brand` in any case;
  the operator is the longest run of `<>=!` and must be one of `= != < <= > >=`, where a lone `!` is
  read as `!=` as the C parser does. `cuda` is the driver's CUDA version (the table below), `driver` the
  kernel driver version, `arch` the compute capability, all compared numerically per dot-separated
  component (`12.4 == 12.4.0`, `12.4 < 12.4.1`); `brand` compares case-insensitively, `=`/`!=` only.
  A fact the runtime cannot determine makes its condition true. Conditions are evaluated lazily, left
  to right, so a malformed one is reported only once it is reached: an unknown property, a missing or
  unknown operator, an empty value or a version that is not digits and dots is `invalid expression`.
- The failure text: `nvidia-container-cli: requirement error: unsatisfied condition: <first token>`,
  the first space-separated token of the failing requirement as written, plus `, please update your
  driver to a newer version, or use an earlier cuda container` only when that token starts with the
  exact bytes `cuda>=`; wrapped in the OCI runtime's hook-failure text (`_HOOK_PREFIX`, `: unknown`).
- The driver's CUDA level: NVIDIA's CUDA Toolkit release notes, table 3 "CUDA Toolkit and Corresponding
  Driver Versions" (Linux x86_64), reduced to the lowest driver listed for each CUDA minor (`NATIVE_CUDA`).

Not modelled:

- Image configs are not read. An `nvidia/cuda:<x.y[.z]>-...` reference (Docker Hub, NGC or a mirror
  ending in `/nvidia/cuda`) stands for an image whose environment holds `CUDA_VERSION=<x.y[.z]>` and no
  requirement, so it needs `cuda>=x.y`. NVIDIA's real images carry an explicit `NVIDIA_REQUIRE_CUDA`
  whose extra `brand=...,driver>=N,driver<N+1` alternatives admit older data-center driver branches
  (forward compatibility through cuda-compat); those alternatives are not modelled, so such an image is
  refused here where the real runtime may start it. Other images' own environment is unknown: only the
  container's environment counts for them.
- A `CUDA_VERSION` that is not a semantic version makes the real hook fail with its own error; here
  it adds no requirement.
- The hook collects the requirement variables in Go map order (random); here they are checked in name
  order, the synthesised `cuda>=` last, so when several fail the one named may differ from a real run.
- The runtime evaluates per visible GPU; callers pass one brand (and, optionally, one compute
  capability) for the replica's identical GPUs. No arch passed means arch conditions hold. The hook
  runs no check when no GPU is visible; callers ask only for GPU replicas.
- The CDI and csv (Tegra) modes, which check nothing or look property names up case-sensitively;
  version numbers beyond 64 bits; the cap on the number of requirements.
- Drivers older than the table's oldest row (CUDA 10.0, 410.48) report no CUDA version, so `cuda`
  conditions hold on them. Windows drivers are not covered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

# How containerd reports the failed prestart hook (Docker 24+/containerd, legacy mode), before the
# nvidia-container-cli line itself.
_HOOK_PREFIX = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: "
    "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
    "Auto-detected mode as 'legacy'\n"
)
_CLI = "nvidia-container-cli: requirement error: "
_CUDA_HINT_PREFIX = "cuda>="
_CUDA_HINT = ", please update your driver to a newer version, or use an earlier cuda container"


class NativeCuda(NamedTuple):
    """A driver at or above `driver` runs CUDA `cuda` natively (nvidia-smi prints it as CUDA Version)."""

    driver: str
    cuda: str
    source: str  # the release-notes row the driver comes from


# Newest first. Each CUDA minor's floor is the lowest Linux x86_64 driver the release notes list for it
# (its GA release, or 11.0's RC); updates of the same minor need newer drivers of the same branch but
# report the same CUDA minor. From 13.3 the notes name only the driver branch.
NATIVE_CUDA: tuple[NativeCuda, ...] = (
    NativeCuda("615", "13.4", "13.4: R615 (branch only)"),
    NativeCuda("610", "13.3", "13.3: R610 (branch only)"),
    NativeCuda("595.45.04", "13.2", "13.2 GA"),
    NativeCuda("590.44.01", "13.1", "13.1 GA"),
    NativeCuda("580.65.06", "13.0", "13.0 GA"),
    NativeCuda("575.51.03", "12.9", "12.9 GA"),
    NativeCuda("570.26", "12.8", "12.8 GA (there is no 12.7 toolkit)"),
    NativeCuda("560.28.03", "12.6", "12.6 GA"),
    NativeCuda("555.42.02", "12.5", "12.5 GA"),
    NativeCuda("550.54.14", "12.4", "12.4 GA"),
    NativeCuda("545.23.06", "12.3", "12.3 GA"),
    NativeCuda("535.54.03", "12.2", "12.2 GA"),
    NativeCuda("530.30.02", "12.1", "12.1 GA"),
    NativeCuda("525.60.13", "12.0", "12.0 GA"),
    NativeCuda("520.61.05", "11.8", "11.8 GA"),
    NativeCuda("515.43.04", "11.7", "11.7 GA"),
    NativeCuda("510.39.01", "11.6", "11.6 GA"),
    NativeCuda("495.29.05", "11.5", "11.5 GA"),
    NativeCuda("470.42.01", "11.4", "11.4.0 GA"),
    NativeCuda("465.19.01", "11.3", "11.3.0 GA"),
    NativeCuda("460.27.03", "11.2", "11.2.0 GA"),
    NativeCuda("455.23", "11.1", "11.1 GA"),
    NativeCuda("450.36.06", "11.0", "11.0.1 RC"),
    # CUDA 10.x: the CUDA Compatibility guide's table of minimum drivers.
    NativeCuda("440.33", "10.2", "10.2"),
    NativeCuda("418.39", "10.1", "10.1"),
    NativeCuda("410.48", "10.0", "10.0"),
)

# Go's strconv.ParseBool: the spellings it reads as true.
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
_JETPACK_PREFIX = "NVIDIA_REQUIRE_JETPACK"

# dsl.c's operator table, in its order: the first entry whose leading characters equal the operator run
# (and that is at least as long) wins, which makes a lone "!" read as "!=".
_OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_OP_CHARS = "<>=!"

# golang.org/x/mod/semver, after the hook prefixes "v": vMAJOR[.MINOR[.PATCH[-pre][+build]]], no
# leading zeros; pre-release and build suffixes only on the full three-part form.
_IDENT = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_NUM = r"(?:0|[1-9][0-9]*)"
_SEMVER = re.compile(rf"v(?P<major>{_NUM})(?:\.(?P<minor>{_NUM})(?:\.{_NUM}(?:-{_IDENT})?(?:\+{_IDENT})?)?)?")
_UINT32 = 2**32

_VERSION_CHARS = re.compile(r"[0-9.]+")

# The leading version of an nvidia/cuda tag: "12.4.1-base-ubuntu22.04", "11.0-base".
_CUDA_TAG = re.compile(r"(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)(?:-|$)")


def driver_major(driver_version: str) -> int:
    head = driver_version.split(".")[0]
    return int(head) if head.isdigit() else 0


def _version(text: str) -> tuple[int, ...] | None:
    """A version as dsl.c compares it: digits and dots, not starting with a dot; runs of dots separate
    components and trailing zero components do not count (`12.4.0 == 12.4`). None where the C code
    answers -1 (malformed)."""
    if not _VERSION_CHARS.fullmatch(text) or text.startswith("."):
        return None
    parts = [int(p) for p in text.split(".") if p]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def max_cuda_for_driver(driver_version: str) -> str | None:
    """Highest CUDA version the driver supports natively, e.g. "12.4" for 550.144.03; None when the
    driver is not a version or predates every row of `NATIVE_CUDA`."""
    driver = _version(driver_version.strip())
    if driver is None:
        return None
    for row in NATIVE_CUDA:
        floor = _version(row.driver)
        if floor is not None and driver >= floor:
            return row.cuda
    return None


def cuda_tag_version(image: str) -> str | None:
    """The CUDA version an `nvidia/cuda` tag leads with (`nvidia/cuda:12.4.1-base-ubuntu22.04` ->
    `12.4.1`), for Docker Hub, NGC and mirrors whose path ends in `/nvidia/cuda`; None otherwise."""
    name = image.strip().partition("@")[0]
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon <= slash:
        return None  # no tag (`nvidia/cuda` or a digest-only reference)
    repository, tag = name[:colon], name[colon + 1 :]
    if repository != "nvidia/cuda" and not repository.endswith("/nvidia/cuda"):
        return None
    m = _CUDA_TAG.match(tag)
    return m["version"] if m else None


def _image_env(image: str) -> dict[str, str]:
    """What the image's own config is modelled to set (see the module docstring)."""
    version = cuda_tag_version(image)
    return {"CUDA_VERSION": version} if version else {}


def _major_minor(cuda_version: str) -> str | None:
    """The hook's `parseMajorMinorVersion`: `12.4.1` -> `12.4`, `12` -> `12.0`; None when not semver."""
    m = _SEMVER.fullmatch("v" + cuda_version.removeprefix("v"))
    if not m:
        return None
    major, minor = int(m["major"]), int(m["minor"] or 0)
    if major >= _UINT32 or minor >= _UINT32:
        return None
    return f"{major}.{minor}"


def image_requirements(image: str, env: Mapping[str, str]) -> list[str]:
    """The requirement strings the hook passes to `nvidia-container-cli configure --require=...`, in the
    order they are checked; empty when `NVIDIA_DISABLE_REQUIRE` is true or nothing is required."""
    merged = {**_image_env(image), **env}
    if merged.get("NVIDIA_DISABLE_REQUIRE") in _GO_TRUE:
        return []
    requirements = [
        value
        for name, value in sorted(merged.items())
        if name.startswith(_REQUIRE_PREFIX) and not name.startswith(_JETPACK_PREFIX)
    ]
    cuda_version = merged.get("CUDA_VERSION", "")
    if cuda_version and not merged.get("NVIDIA_REQUIRE_CUDA"):
        major_minor = _major_minor(cuda_version)
        if major_minor is not None:
            requirements.append(f"cuda>={major_minor}")
    return requirements


class _Host(NamedTuple):
    """What nvidia-container-cli knows; None is "could not be determined"."""

    cuda: str | None
    driver: str | None
    brand: str | None
    arch: str | None


def _compare_version(actual: str, op: str, wanted: str) -> bool | None:
    have, want = _version(actual), _version(wanted)
    if have is None or want is None:
        return None
    if op == "=":
        return have == want
    if op == "!=":
        return have != want
    if op == "<":
        return have < want
    if op == "<=":
        return have <= want
    if op == ">":
        return have > want
    return have >= want


def _condition(expr: str, host: _Host) -> bool | None:
    """One `<property><op><value>` condition; None is the runtime's `invalid expression`."""
    start = next((i for i, ch in enumerate(expr) if ch in _OP_CHARS), len(expr))
    end = start
    while end < len(expr) and expr[end] in _OP_CHARS:
        end += 1
    run = expr[start:end]
    if start == 0 or not run:
        return None
    op = next((o for o in _OPERATORS if len(o) >= len(run) and o[: len(run)] == run), None)
    value = expr[end:]
    if op is None or not value:
        return None
    prop = expr[:start].lower()
    if prop == "cuda":
        return True if host.cuda is None else _compare_version(host.cuda, op, value)
    if prop == "driver":
        return True if host.driver is None else _compare_version(host.driver, op, value)
    if prop == "arch":
        return True if host.arch is None else _compare_version(host.arch, op, value)
    if prop == "brand":
        if host.brand is None:
            return True
        if op not in ("=", "!="):
            return None
        same = host.brand.lower() == value.lower()
        return same if op == "=" else not same
    return None


def _check(requirement: str, host: _Host) -> str | None:
    """dsl_evaluate: None when the requirement holds, else the cli's text after `requirement error: `."""
    holds = True
    for term in requirement.split(" "):
        if not term:
            continue
        whole = True
        for part in term.split(","):
            if not part:
                continue
            result = _condition(part, host)
            if result is None:
                return "invalid expression"
            holds = result
            if not holds:
                whole = False
                break
        if whole:
            break  # this term held (or had no conditions: the previous outcome stands, as in dsl.c)
    if holds:
        return None
    first = requirement.split(" ")[0]
    hint = _CUDA_HINT if first.startswith(_CUDA_HINT_PREFIX) else ""
    return f"unsatisfied condition: {first}{hint}"


def start_failure(
    image: str, env: Mapping[str, str], *, driver: str, brand: str | None, arch: str | None = None
) -> str | None:
    """The runtime's error text when the image may not start on this driver, else None."""
    requirements = image_requirements(image, env)
    if not requirements:
        return None
    host = _Host(
        cuda=max_cuda_for_driver(driver),
        driver=driver if _version(driver) is not None else None,
        brand=brand,
        arch=arch,
    )
    for requirement in requirements:
        error = _check(requirement, host)
        if error is not None:
            return f"{_HOOK_PREFIX}{_CLI}{error}: unknown"
    return None
