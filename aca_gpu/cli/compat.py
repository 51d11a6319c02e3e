"""`acagpu compat`: will this image's CUDA run on that driver? Offline, from NVIDIA's tables."""

from __future__ import annotations

from dataclasses import replace

import click

from aca_gpu.cli.options import output_options
from aca_gpu.errors import EXIT_GPU_CHECK, AcaGpuError
from aca_gpu.gpu.cuda_compat import CompatVerdict, verdict
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.output import Output

_GLYPH = {"ok": "✓", "minor-compat": "!", "incompatible": "✗", "unknown": "?"}


def headline(result: CompatVerdict) -> str:
    """What decides the exit code, first: a pair the container runtime would refuse fails (5) even
    when NVIDIA's tables call it minor-compat, so the headline says refused, not minor-compat."""
    if result.verdict != "incompatible" and result.require_check == "fail":
        return f"✗ refused by the container runtime ({result.verdict} by NVIDIA's tables)"
    return f"{_GLYPH[result.verdict]} {result.verdict}"


def failure(result: CompatVerdict) -> str:
    """The `error:` line of a failing verdict (exit 5)."""
    where = f"{result.image} on driver {result.driver_version}"
    if result.verdict == "incompatible":
        needs = f" (needs >= {result.min_driver})" if result.min_driver else ""
        return f"incompatible: driver {result.driver_version} cannot run {result.image}{needs}"
    return f"the container runtime would refuse {where}: {result.require} is not met"


def render_verdict(result: CompatVerdict) -> str:
    lines = [
        f"{headline(result)}: {result.image} on driver {result.driver_version}",
        f"  CUDA in image:      {result.cuda_version or 'unknown'}",
        f"  minimum driver:     {result.min_driver or 'unknown'}",
        f"  driver runs up to:  CUDA {result.max_cuda or 'older than 10.0'}",
        f"  runtime check:      {result.require_check}" + (f"  ({result.require})" if result.require else ""),
        f"  {result.reason}",
    ]
    return "\n".join(lines)


def from_registry(ref: ImageRef, driver: str, output: Output) -> CompatVerdict | None:
    """An nvidia/cuda image (or a mirror of it) whose tag does not follow NVIDIA's scheme, or a
    digest: its own CUDA_VERSION / NVIDIA_REQUIRE_CUDA, read through its registry."""
    from aca_gpu.workflow.tester.validate import registry_inspector

    try:  # a registry that answers slowly holds the read up to its timeout: a step says so
        with output.step("image registry") as step:
            step.update(str(ref))
            info = registry_inspector(ref)
    except AcaGpuError as exc:
        output.warn(f"could not read {ref} from its registry: {exc.message}")
        return None
    if not info.get("cuda_version"):
        return None
    found = verdict(str(info["cuda_version"]), driver, require=info.get("require_cuda"))
    return replace(found, image=str(ref), reason=f"{found.reason} (CUDA_VERSION read from the registry)")


def exit_code_for(result: CompatVerdict) -> int:
    """0 for ok, minor-compat and unknown; 5 when incompatible or the runtime would refuse the image."""
    return 0 if result.ok else EXIT_GPU_CHECK


@click.command()
@click.option("--image", required=True, help="Image reference, e.g. nvidia/cuda:12.1.1-runtime-ubuntu22.04.")
@click.option(
    "--driver",
    help="Host NVIDIA driver version, e.g. 535.104.05 (default: ACA's current one: the last a GPU "
    "replica reported to acagpu here, else the bundled 580.159.04).",
)
@click.option(
    "--require",
    "require",
    help='The image\'s NVIDIA_REQUIRE_CUDA, e.g. "cuda>=12.4 brand=tesla,driver>=535,driver<536".',
)
@click.option(
    "--offline",
    is_flag=True,
    help="Never ask the registry (an nvidia/cuda image whose tag hides its CUDA stays unknown).",
)
@output_options
def compat(output: Output, image: str, driver: str | None, require: str | None, offline: bool) -> None:
    """Judge an image's CUDA version against a host driver using NVIDIA's published tables.

    Verdicts: ok (driver supports it natively), minor-compat (same major, above the family floor:
    most code runs, PTX JIT and newest features fail), incompatible, unknown (tag hides the CUDA
    version). Also reports whether the NVIDIA container runtime's NVIDIA_REQUIRE_CUDA check would
    refuse to start the container. Exit codes: 0 ok, minor-compat or unknown (the same rule as `up`
    and `validate`), 5 incompatible or refused, 2 bad input.
    """
    source = None
    if driver is None:  # the question is "on ACA": judged against its current driver, and said
        from aca_gpu.workflow.preflight.drivers import latest_driver

        driver, source = latest_driver()
    ref = parse_image_ref(image)
    result = replace(verdict(ref, driver, require), image=image.strip())
    if result.verdict == "unknown" and ref.is_nvidia_cuda and require is None and not offline:
        result = from_registry(ref, driver, output) or result
    if result.verdict == "unknown":
        output.warn(f"cannot tell the CUDA version of {result.image}: {result.reason.split(';')[0]}")
    doc = {**result.as_dict(), "driver_source": source or "--driver"}
    shown = render_verdict(result) + (f"\n  driver from:        {source}" if source else "")
    output.emit(doc, shown)
    code = exit_code_for(result)
    if code:
        output.error(failure(result))
        raise SystemExit(code)
