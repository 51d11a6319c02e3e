"""`acagpu logs`: console logs of the explorer (default) or the tester, or the system events."""

from __future__ import annotations

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import run_options
from aca_gpu.config import Settings
from aca_gpu.output import Output
from aca_gpu.workflow.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.logs import log_lines


@click.command()
@run_options
@click.option("--tester", "source", flag_value="tester", help="The tester job's latest execution.")
@click.option(
    "--explorer", "source", flag_value="explorer", default=True, help="The CUDA explorer (default)."
)
@click.option("--follow", "-f", is_flag=True, help="Keep streaming new lines.")
@click.option("--tail", type=click.IntRange(0, 300), default=20, show_default=True, help="Lines of history.")
@click.option("--system", is_flag=True, help="System events (scheduling, image pull, restarts) instead.")
@output_options
def logs(
    output: Output, ref: RunRef, settings: Settings, source: str, follow: bool, tail: int, system: bool
) -> None:
    """Show a run's logs."""
    cloud = open_cloud(settings)
    run = find_run(cloud, ref)
    lines = log_lines(
        cloud,
        run,
        source="tester" if source == "tester" else "explorer",
        follow=follow,
        tail=tail,
        system=system,
    )
    if output.is_json:
        doc = {
            "command": "logs",
            "run_id": run.run_id,
            "source": source,
            "system": system,
            "lines": list(lines),
        }
        output.emit(doc, "")
        return
    for line in lines:
        click.echo(line)
