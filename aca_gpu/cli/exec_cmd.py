"""`acagpu exec -- CMD ARGS...`: run a command in the run's CUDA explorer; its exit code becomes ours."""

from __future__ import annotations

import click

from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import run_options, waiter_for
from aca_gpu.config import Settings
from aca_gpu.errors import CloudError
from aca_gpu.output import Output
from aca_gpu.workflow.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.probe import exec_command


@click.command(name="exec", context_settings={"ignore_unknown_options": True})
@run_options
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True, help="Seconds.")
@output_options
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(output: Output, ref: RunRef, settings: Settings, timeout: float, argv: tuple[str, ...]) -> None:
    """Run a command non-interactively in the explorer (no TTY needed); returns the remote exit code."""
    cloud = open_cloud(settings)
    run = find_run(cloud, ref)
    result = exec_command(cloud, run, argv, waiter_for(settings), timeout=timeout)
    doc = {"command": "exec", "run_id": run.run_id, **result.as_dict()}

    def human(out: object) -> None:
        click.echo(result.output, nl=not result.output.endswith("\n") and bool(result.output))
        if result.stderr:
            click.echo(result.stderr, err=True, nl=not result.stderr.endswith("\n"))

    output.emit(doc, human)
    if result.exit_code is None:
        raise CloudError("the exec session ended before the command reported its exit code")
    if result.exit_code:
        raise SystemExit(result.exit_code)
