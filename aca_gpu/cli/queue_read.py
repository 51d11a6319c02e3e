"""`acagpu attach RUN_ID` and `acagpu results RUN_ID`: a detached queue run read back from anywhere.

Parse, call `workflow/queue/detached.py`, render. Both read only the run's queues and its job
(nothing local), so they work from another machine with the same rights (docs/queue.md).
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import command_settings, waiter_for
from aca_gpu.output import Output


def _emit(output: Output, doc: dict[str, Any]) -> None:
    from aca_gpu.workflow.queue.detached import render

    output.emit(doc, lambda _stdout: print(render(doc), file=output.stderr, flush=True))
    if doc["exit_code"]:
        raise SystemExit(doc["exit_code"])


def _say(output: Output) -> Any:
    def say(text: str) -> None:
        if not output.is_json:
            print(f"  {text}", file=output.stderr, flush=True)

    return say


@click.command()
@click.argument("run_id")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def attach(output: Output, run_id: str, subscription: str | None) -> None:
    """Follow a detached queue run until every item is done, then print its results."""
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.queue.detached import attach as follow

    settings = command_settings(subscription)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())  # Ctrl-C: stop following only
    try:
        doc = follow(open_cloud(settings), run_id, _say(output), cancel, tick_s=waiter_for(settings).interval)
    finally:
        signal.signal(signal.SIGINT, previous)
    _emit(output, doc)


@click.command()
@click.argument("run_id")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def results(output: Output, run_id: str, subscription: str | None) -> None:
    """Print a queue run's results now, every item in item order, done or not."""
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.queue.detached import results as read

    settings = command_settings(subscription)
    _emit(output, read(open_cloud(settings), run_id, _say(output)))
