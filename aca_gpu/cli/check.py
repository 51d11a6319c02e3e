"""`acagpu check`: credentials, subscription, provider, and per region and GPU whether a run can start."""

from __future__ import annotations

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import command_settings
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import open_cloud
from aca_gpu.workflow.preflight.check import CheckRequest, render
from aca_gpu.workflow.preflight.check import check as run_check


@click.command()
@click.option(
    "-l",
    "--location",
    "locations",
    multiple=True,
    help="Region to check; repeat for several (default: settings).",
)
@click.option("--gpu", "gpus", multiple=True, help="GPU alias (t4, a100, ...); repeat (default: settings).")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def check(
    output: Output, locations: tuple[str, ...], gpus: tuple[str, ...], subscription: str | None
) -> None:
    """Check credentials, subscription, provider, and per region and GPU: offer, quota, price, driver.

    Exit 0 when every GPU asked for can run in one of the regions, 3 when GPU quota refuses where
    the profile is offered, 2 when no region offers it (or the input is bad). Creates nothing.
    """
    settings = command_settings(subscription)
    request = CheckRequest(locations or (settings.location,), gpus or (settings.gpu,))
    result = run_check(open_cloud(settings), request)
    doc = dict(result.doc)
    doc["error"] = result.error.as_dict() if result.error is not None else None
    output.emit(doc, render(doc))
    if result.error is not None:  # emit printed the one error line
        raise SystemExit(result.error.exit_code)
