"""`acagpu test`: run the gpu-tester on an existing run and report; exit 5 when the GPU check fails."""

from __future__ import annotations

import click

from aca_gpu import naming
from aca_gpu.cli.options import output_options
from aca_gpu.cli.runopts import run_options, waiter_for
from aca_gpu.config import Settings
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud, resolve_owner
from aca_gpu.workflow.tester.render import finish, render_up
from aca_gpu.workflow.tester.test import run_test, test_in_env


@click.command(name="test")
@run_options
@click.option("--timeout", default="30m", show_default=True, help="Deadline for the tester's result line.")
@click.option("--start-timeout", default="15m", show_default=True, help="Deadline for its replica to start.")
@click.option(
    "--env",
    "env_name",
    help="Instead of a kept run: run the tester alone in this warm environment (a new run; its job is "
    "made and removed).",
)
@click.option("--gpu", help="With --env: GPU alias (default: settings, else t4).")
@output_options
def test_cmd(
    output: Output,
    ref: RunRef,
    settings: Settings,
    timeout: str,
    start_timeout: str,
    env_name: str | None,
    gpu: str | None,
) -> None:
    """Start the tester job of a kept run, follow it, and report its result."""
    deadline = naming.parse_ttl(timeout).total_seconds()
    start = naming.parse_ttl(start_timeout).total_seconds()
    cloud = open_cloud(settings)
    if env_name is not None:
        outcome = test_in_env(
            cloud,
            settings,
            env_name,
            output,
            waiter_for(settings),
            owner=resolve_owner(settings),
            gpu=gpu,
            run_id=ref.run_id,
            start_timeout=start,
            timeout=deadline,
        )
        finish(output, outcome, render_up)
        return
    run = find_run(cloud, ref)
    outcome = run_test(
        cloud,
        run,
        output,
        waiter_for(settings),
        owner=resolve_owner(settings),
        start_timeout=start,
        timeout=deadline,
    )
    finish(output, outcome, render_up)
