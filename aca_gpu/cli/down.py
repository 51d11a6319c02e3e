"""`acagpu down`: delete a run's resource group (only if tagged acagpu:managed=true) and verify it is gone."""

from __future__ import annotations

from collections.abc import Callable

import click

from aca_gpu.cli.options import confirm, output_options
from aca_gpu.cli.runopts import run_options, waiter_for
from aca_gpu.config import Settings
from aca_gpu.models import Cloud
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.fleet.down import down as run_down
from aca_gpu.workflow.fleet.down import render_down
from aca_gpu.workflow.fleet.groups import subscriptions_holding


@click.command()
@run_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--no-wait", is_flag=True, help="Return once the deletion is accepted; do not verify.")
@output_options
def down(output: Output, ref: RunRef, settings: Settings, yes: bool, no_wait: bool) -> None:
    """Delete a run and wait until its resource group is really gone."""
    named = f"run {ref.run_id}" if ref.run_id else (ref.resource_group or "the only run")
    cloud: Cloud | None = None

    def question() -> str:  # asked only on a terminal: no Azure call before the refusal
        nonlocal ref, cloud
        cloud = open_cloud(settings)
        run = find_run(cloud, ref)
        ref = RunRef(resource_group=run.resource_group)  # delete exactly what was confirmed
        return f"Delete resource group {run.resource_group} (run {run.run_id}) and everything in it?"

    confirm(question, yes=yes, refusal=f"not deleting {named}")
    cloud = cloud or open_cloud(settings)
    result = run_down(
        cloud, ref, output, waiter_for(settings), wait=not no_wait, elsewhere=_elsewhere(settings)
    )
    output.emit(result.doc, render_down(result.doc))
    if result.exit_code:
        raise SystemExit(result.exit_code)


def _elsewhere(settings: Settings) -> Callable[[str], list[str]]:
    return lambda run_id: subscriptions_holding(settings, run_id)
