"""`acagpu image`: images for a warm environment, staged in its own registry (docs/staging.md)."""

from __future__ import annotations

from typing import Any, TextIO

import click

from aca_gpu.cli.options import confirm, output_options, refuse_unanswerable
from aca_gpu.cli.runopts import command_settings
from aca_gpu.errors import Interrupted
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import open_cloud
from aca_gpu.workflow.env.staging.stage import stage_arguments, stage_images


@click.group()
def image() -> None:
    """Images for warm environments: stage them in the environment's own registry."""


def _render(doc: dict[str, Any]) -> Any:
    def human(stream: TextIO) -> None:
        tier = f", {doc['sku']}" if doc.get("sku") else ""
        where = f"{doc['login_server']}{tier}"
        print(f"registry {doc['registry']} ({where}) in {doc['resource_group']}", file=stream)
        for change in doc.get("changed") or []:
            print(f"changed: {change}", file=stream)
        for item in doc["images"]:
            size = f", {item['bytes'] / 1e9:.2f} GB" if item.get("bytes") else ""
            streamed = ", streaming artifact" if item.get("streaming") == "converted" else ""
            print(f"  {item['image']} -> {item['staged_as']}{size}{streamed}", file=stream)
        for note in doc["notes"]:
            print(f"note: {note}", file=stream)

    return human


@image.command()
@click.argument("images", nargs=-1, required=True)
@click.option("--env", "env_name", required=True, help="The warm environment whose runs pull them.")
@click.option(
    "--inspect/--no-inspect",
    default=True,
    show_default=True,
    help="Read each image's digest and size from its registry first (a missing tag is refused here).",
)
@click.option(
    "--sku",
    type=click.Choice(["Standard", "Premium"]),
    help="The registry's tier (default: the registry's own, Standard for a new one); another tier than "
    "the registry's is a change, asked first. Premium is what ACR's artifact streaming needs.",
)
@click.option(
    "--stream",
    is_flag=True,
    help="Have ACR convert each image into a streaming artifact and wait for it (needs --sku Premium).",
)
@click.option("--yes", is_flag=True, help="Do not ask before creating or re-tiering the registry.")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def stage(
    output: Output,
    images: tuple[str, ...],
    env_name: str,
    inspect: bool,
    sku: str | None,
    stream: bool,
    yes: bool,
    subscription: str | None,
) -> None:
    """Import IMAGES into the environment's registry (made on request) so its runs pull them by tag
    from the same region, with the environment's managed identity. Staging adds to what is staged.
    The registry bills a fixed fee per day for its tier: it asks before making the registry or
    changing its tier (--yes). Exit 2 before anything is made when an image, the registry name or
    your right to assign AcrPull says it cannot work, or when --stream is asked of a registry that
    is not Premium."""
    stage_arguments(images, sku, stream)  # bad input is said as such, before the `--yes` rule
    refusal = f"not staging images in environment {env_name}"
    refuse_unanswerable(yes=yes, refusal=refusal)  # before any step: staging always asks
    cloud = open_cloud(command_settings(subscription))

    def approve(question: str) -> None:
        confirm(question, yes=yes, refusal=refusal)

    try:
        result = stage_images(
            cloud, env_name, images, output, inspect=inspect, sku=sku, stream=stream, approve=approve
        )
    except KeyboardInterrupt:  # a registry made (and billing its daily fee) and imports under way stay
        raise Interrupted(
            f"interrupted: what environment {env_name}'s registry already holds stays, and an import "
            "under way finishes on the registry's side",
            hint=f"the same `acagpu image stage ... --env {env_name}` again records it; "
            f"`acagpu env show {env_name}` shows the registry and its daily fee",
        ) from None
    doc = {"schema": 1, **result.as_dict()}
    output.emit(doc, _render(doc))
