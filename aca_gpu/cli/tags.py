"""`acagpu tags`: the CUDA tags a repository has that are worth validating, newest first."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.output import Output
from aca_gpu.workflow.preflight import tags as tags_flow


@click.command()
@click.argument("repository")
@click.option(
    "--registry", help="Registry host (e.g. nvcr.io); default: the one in REPOSITORY, else Docker Hub."
)
@click.option("--flavor", help="Only this flavor: base, runtime, devel, cudnn-runtime, cudnn-devel...")
@click.option("--os", "os_name", metavar="OS", help="Only this OS, e.g. ubuntu22.04, ubuntu24.04, ubi9.")
@click.option("--since", metavar="VERSION", help="Only CUDA versions at or above this, e.g. 12.1.")
@click.option(
    "--not-in",
    type=click.Path(path_type=Path),
    help="Leave out tags listed here: one tag or image per line, a JSON list, or a validation report.",
)
@click.option("--limit", type=int, help="At most this many tags (the newest).")
@click.option("--inspect", is_flag=True, help="Also read each tag's digest and NVIDIA_REQUIRE_CUDA.")
@click.option("--username", envvar="ACAGPU_REGISTRY_USERNAME", help="Registry user (private registries).")
@click.option("--password", envvar="ACAGPU_REGISTRY_PASSWORD", help="Registry password or token.")
@click.option(
    "--ca-bundle",
    envvar="ACAGPU_REGISTRY_CA_BUNDLE",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM bundle to trust for a registry with its own CA.",
)
@output_options
def tags(
    repository: str,
    registry: str | None,
    flavor: str | None,
    os_name: str | None,
    since: str | None,
    not_in: Path | None,
    limit: int | None,
    inspect: bool,
    username: str | None,
    password: str | None,
    ca_bundle: str | None,
    output: Output,
) -> None:
    """List REPOSITORY's CUDA tags (nvidia/cuda naming), newest first.

    \b
    Example, the runtime images for Ubuntu 22.04 from CUDA 12.1 on:
      acagpu tags nvidia/cuda --flavor runtime --os ubuntu22.04 --since 12.1

    With -o json it prints {"tags": [...]}; `-o json --query tags` is the bare list a GitHub
    Actions matrix takes: tag strings (`matrix: {tag: ${{ fromJSON(needs.discover.outputs.tags) }}}`),
    or with --inspect objects with tag, image, digest and cuda_version (`matrix: {include: ...}`).
    ACR registries (*.azurecr.io) are read with your Azure credential.
    """
    query = tags_flow.TagsQuery(
        repository=repository,
        registry=registry,
        flavor=flavor,
        os=os_name,
        since=since,
        not_in=not_in,
        limit=limit,
        inspect=inspect,
        username=username,
        password=password,
        verify=ca_bundle or True,
    )
    result = tags_flow.discover(query, progress=output)
    doc = {"tags": result.as_dict()["tags"] if inspect else result.names}

    def human(stream: TextIO) -> None:
        print(tags_flow.render_text(result), file=stream)

    output.emit(doc, human)
