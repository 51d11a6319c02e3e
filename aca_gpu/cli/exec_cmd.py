"""`acagpu exec -- CMD ARGS...`: run a command in the run's CUDA explorer; its exit code becomes ours.

Local stdin, when it is not a terminal, is sent to the remote command followed by end-of-input,
so `echo hi | acagpu exec -- cat` prints hi; on a terminal the remote command reads nothing.
"""

from __future__ import annotations

import shlex
import sys

import click

from aca_gpu import naming
from aca_gpu.azure.dataplane import STDIN_MAX, with_stdin
from aca_gpu.cli.options import Seconds, output_options
from aca_gpu.cli.runopts import run_options, start_timeout_option, waiter_for
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput, InfraError, WaitTimedOut
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud
from aca_gpu.workflow.engine.probe import exec_command
from aca_gpu.workflow.spend import ledger


def local_input() -> bytes | None:
    """What to feed the remote command: piped or redirected stdin, else nothing."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    data = stream.buffer.read(STDIN_MAX + 1) if hasattr(stream, "buffer") else stream.read().encode()
    if len(data) > STDIN_MAX:
        raise BadInput(f"exec forwards at most {STDIN_MAX // (1024 * 1024)} MiB of stdin")
    return data


@click.command(name="exec", context_settings={"ignore_unknown_options": True})
@run_options
@click.option(
    "--timeout",
    type=Seconds(),
    default=120.0,
    show_default=True,
    help="Seconds, or a duration such as 90s or 5m.",
)
@start_timeout_option
@output_options
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(
    output: Output,
    ref: RunRef,
    settings: Settings,
    timeout: float,
    start_timeout: str,
    argv: tuple[str, ...],
) -> None:
    """Run a command non-interactively in the explorer (no TTY needed); returns the remote exit code."""
    data = local_input()
    cloud = open_cloud(settings)
    run = find_run(cloud, ref)
    result, seconds = exec_command(
        cloud,
        run,
        with_stdin(argv, data),
        waiter_for(settings),
        timeout=timeout,
        start_timeout=naming.parse_ttl(start_timeout).total_seconds(),
        progress=output,
        on_asleep=ledger.wake_recorder(cloud, run),  # the wake's life: the run's one spend figure
    )
    if result.exit_code is None and seconds >= timeout - 1.0:
        raise WaitTimedOut(
            f"--timeout {timeout:g}s passed before `{shlex.join(argv)}` finished in {run.names.explorer}",
            code="ExecTimeout",
            hint="raise --timeout; the remote command may still be running",
        )
    doc = {
        **result.as_dict(),
        "command": "exec",
        "argv": list(argv),
        "run_id": run.run_id,
        "stdin_bytes": len(data or b""),
    }

    def human(out: object) -> None:
        click.echo(result.output, nl=not result.output.endswith("\n") and bool(result.output))
        if result.stderr:
            click.echo(result.stderr, err=True, nl=not result.stderr.endswith("\n"))

    output.emit(doc, human)
    if result.exit_code is None:  # a lost session, never a remote failure (that would be its code)
        raise InfraError(
            f"lost the exec session to {run.names.explorer} before `{shlex.join(argv)}` reported "
            "its exit status",
            code="ExecLost",
            hint="the command may or may not have run; run it again if that is safe",
        )
    if result.exit_code:
        raise SystemExit(result.exit_code)
