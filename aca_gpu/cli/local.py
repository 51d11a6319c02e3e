"""`acagpu local`: the explorer probe and the gpu-tester on this machine's Docker, Podman or Apptainer."""

from __future__ import annotations

import click

from aca_gpu.cli.options import output_options
from aca_gpu.config import DEFAULT_IMAGE
from aca_gpu.output import Output
from aca_gpu.tester import DEFAULT_TESTER_IMAGE


@click.command()
@click.option(
    "--runtime",
    type=click.Choice(["auto", "docker", "podman", "apptainer"]),
    default="auto",
    show_default=True,
    help="Container runtime; auto picks a usable one (Docker with an engine, then Podman, then Apptainer).",
)
@click.option(
    "--image", default=DEFAULT_IMAGE, show_default=True, help="CUDA explorer image (runs nvidia-smi)."
)
@click.option(
    "--tester-image",
    default=DEFAULT_TESTER_IMAGE,
    show_default=True,
    help="Image the zero-build tester runs in.",
)
@click.option("--gpus", default="all", show_default=True, help="all, a count (2), device=0,2, or none.")
@click.option(
    "--podman-gpu",
    type=click.Choice(["cdi", "hook"]),
    default="cdi",
    show_default=True,
    help="How Podman gets the GPU: a CDI spec (`acagpu doctor --write-cdi`) or the NVIDIA OCI hook.",
)
@click.option("--from-sif", "sif", metavar="PATH", help="Probe an existing Apptainer image file.")
@click.option(
    "--sbatch", is_flag=True, help="Print a Slurm batch script for the same probe (Apptainer) and exit."
)
@click.option("--no-tester", is_flag=True, help="Only the nvidia-smi probe.")
@click.option("--quick", is_flag=True, help="The tester's short run.")
@output_options
def local(
    output: Output,
    runtime: str,
    image: str,
    tester_image: str,
    gpus: str,
    podman_gpu: str,
    sif: str | None,
    sbatch: bool,
    no_tester: bool,
    quick: bool,
) -> None:
    """Run the nvidia-smi probe and the gpu-tester on this machine's Docker, Podman or Apptainer.

    The same engine, verdicts and JSON document as `up`: the GPU must be visible in the container,
    the host driver must support the image's CUDA, the tester must pass. Exit codes: 0 ok, 5 no GPU
    in the container or a GPU check failed, 4 the tester ran out of time, 2 bad input or no usable
    runtime (e.g. `--runtime docker` without a Docker engine).
    """
    from aca_gpu.local.gpus import parse_gpus
    from aca_gpu.tester import tester_args
    from aca_gpu.workflow.local.runtime import LocalRequest, run_local

    request = parse_gpus(gpus)
    if sbatch:
        from aca_gpu.local.sbatch import render_sbatch

        script = render_sbatch(image, request, sif=sif)
        output.emit({"runtime": "apptainer", "sbatch": script}, script.rstrip("\n"))
        return
    from aca_gpu.workflow.tester.render import finish, render_up, render_up_markdown

    outcome = run_local(
        LocalRequest(
            runtime=runtime,
            image=image,
            tester_image=tester_image,
            gpus=gpus,
            podman_gpu=podman_gpu,
            sif=sif,
            run_tester=not no_tester,
            tester_args=tuple(tester_args(quick=quick)),
        ),
        output,
    )
    finish(output, outcome, render_up, render_up_markdown)
