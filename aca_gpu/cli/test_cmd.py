"""`acagpu test`: run the gpu-tester on an existing run and report; exit 5 when the GPU check fails."""

from __future__ import annotations

import click

from aca_gpu import naming
from aca_gpu.cli.options import confirm, output_options
from aca_gpu.cli.runopts import run_options, waiter_for
from aca_gpu.config import Settings
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import RunRef, find_run, open_cloud, resolve_owner
from aca_gpu.workflow.tester.render import finish, render_plan, render_up
from aca_gpu.workflow.tester.test import run_test, test_env_plan, test_in_env


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
@click.option("--yes", is_flag=True, help="With --env: do not ask before creating billable resources.")
@output_options
def test_cmd(
    output: Output,
    ref: RunRef,
    settings: Settings,
    timeout: str,
    start_timeout: str,
    env_name: str | None,
    gpu: str | None,
    yes: bool,
) -> None:
    """Start the tester job of a kept run, follow it, and report its result. With --env it makes a
    run of its own (a GPU job), so it asks first, as `up` does (--yes)."""
    deadline = naming.parse_ttl(timeout).total_seconds()
    start = naming.parse_ttl(start_timeout).total_seconds()
    if env_name is not None:
        plan = test_env_plan(
            settings,
            env_name,
            owner=resolve_owner(settings),
            gpu=gpu,
            run_id=ref.run_id,
            start_timeout=start,
            timeout=deadline,
        )
        question = render_plan(plan.as_dict(), dry_run=False) + "\nCreate these billable resources?"
        confirm(question, yes=yes, refusal="not creating billable resources")
        finish(output, test_in_env(open_cloud(settings), plan, output, waiter_for(settings)), render_up)
        return
    cloud = open_cloud(settings)
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
