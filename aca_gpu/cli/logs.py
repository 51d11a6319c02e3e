"""`acagpu logs`: console logs of the explorer (default) or the tester, or the system events."""

from __future__ import annotations

from typing import Any, TextIO

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.render import table
from aca_gpu.cli.runopts import run_options
from aca_gpu.config import Settings
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.tester.logs import EVENT_COLUMNS, Source, log_lines, system_events


def render_events(events: list[dict[str, Any]], stream: TextIO) -> None:
    """System events as a table sized to the terminal, oldest first, as ACA sends them."""
    if not events:
        print("(no system events)", file=stream)
        return
    headers = ["TIME", "TYPE", "REASON", "REPLICA", "MESSAGE"]
    rows = [[str(e.get(key) or "") for key in EVENT_COLUMNS] for e in events]
    print(table(headers, rows, stream=stream, wrap="MESSAGE"), file=stream)


@click.command()
@run_options
@click.option("--tester", is_flag=True, help="The tester job's latest execution (while it runs).")
@click.option("--explorer", is_flag=True, help="The CUDA explorer (the default).")
@click.option("--follow", "-f", is_flag=True, help="Keep streaming new lines (Ctrl-C stops, exit 130).")
@click.option("--tail", type=click.IntRange(0, 300), default=20, show_default=True, help="Lines of history.")
@click.option("--system", is_flag=True, help="System events (scheduling, image pull, restarts) instead.")
@output_options
def logs(
    output: Output,
    ref: RunRef,
    settings: Settings,
    tester: bool,
    explorer: bool,
    follow: bool,
    tail: int,
    system: bool,
) -> None:
    """Show a run's logs."""
    if tester and explorer:
        raise click.UsageError("--tester and --explorer cannot be used together")
    if system and follow:
        raise click.UsageError("--follow and --system cannot be used together (events are a snapshot)")
    source: Source = "tester" if tester else "explorer"
    cloud = open_cloud(settings)
    run = find_run(cloud, ref)
    if system:
        events = system_events(cloud, run, source=source, tail=tail)
        doc = {"run_id": run.run_id, "source": source, "system": True, "events": events}
        output.emit(doc, lambda stream: render_events(events, stream))
        return
    lines = log_lines(cloud, run, source=source, follow=follow, tail=tail)
    if output.is_json:
        doc = {"run_id": run.run_id, "source": source, "system": False, "lines": list(lines)}
        output.emit(doc, "")
        return
    for line in lines:
        click.echo(line)
