"""`acagpu status`: the runs in the subscription, found by their tags."""

from __future__ import annotations

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import command_settings
from aca_gpu.output import Output
from aca_gpu.workflow.context import open_cloud
from aca_gpu.workflow.render import render_status
from aca_gpu.workflow.status import status as run_status


@click.command()
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def status(output: Output, subscription: str | None) -> None:
    """List acagpu runs: age, expiry, phase and estimated spend so far."""
    doc = run_status(open_cloud(command_settings(subscription)))
    output.emit(doc, render_status(doc))
