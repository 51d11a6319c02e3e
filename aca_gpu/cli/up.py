"""`acagpu up`: provision, probe, benchmark, report, tear down (docs/up.md)."""

from __future__ import annotations

from contextlib import nullcontext

import click

from aca_gpu.cli.options import NOTIFY_HELP, confirm, notify_url, output_options
from aca_gpu.cli.runopts import command_settings, emulated_plan, emulator_settings, waiter_for
from aca_gpu.cli.workload_options import limit_options, target_options
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import open_cloud, resolve_owner
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.env.warm_runtime import placed_plan
from aca_gpu.workflow.tester.render import finish, render_plan, render_up, render_up_markdown
from aca_gpu.workflow.tester.up import capped_plan, kept_plan
from aca_gpu.workflow.tester.up import up as run_up


@click.command()
@click.option("-l", "--location", help="Azure region, e.g. eastus (default: settings, else eastus).")
@click.option(
    "--regions",
    help="Regions to try in order, e.g. eastus,westus3: a region that cannot place the run is cleaned "
    "up and the next one used (default: -l only; for a100 without -l, a documented order).",
)
@limit_options(
    max_cost_help="Spend at most USD on this run: nothing new starts past it less one start's cost, and what "
    "runs is stopped at it (exit 8).",
    wait_help="Wait up to DURATION (e.g. 2h) while no region or GPU allowed has capacity: sweep them again, "
    "30 s growing to 10 min apart, nothing billing in between; exit 3 with each region's reason at the end.",
)
@click.option(
    "--env",
    "env_name",
    help="Run inside this warm environment (`acagpu env create`): only the run's jobs are made and "
    "removed (default: the `env` setting; none: a run-scoped environment, built and deleted).",
)
@click.option(
    "--gpu",
    help="GPU alias: t4, a100, nc24-a100, ... (`acagpu profiles --offline`); a list such as a100,t4 "
    "means A100 across its region order, else T4.",
)
@click.option("--image", help="CUDA explorer image (default nvidia/cuda:12.1.1-runtime-ubuntu22.04).")
@click.option(
    "--tester-image", help="gpu-tester image (default: a stock PyTorch image + the injected tester)."
)
@click.option("--run-id", help="Run id (1-12 lowercase letters/digits); the same id resumes a run.")
@click.option("--ttl", help="Expiry written to the tags for the reaper, e.g. 90m, 2h (default 2h).")
@click.option(
    "--max-minutes", type=click.IntRange(1, 1440), help="Deadline for the run's containers (default 30)."
)
@click.option("--start-timeout", help="How long a replica may take to start, e.g. 15m (default).")
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the run (explorer stopped between uses); `acagpu down` removes it.",
)
@click.option("--yes", is_flag=True, help="Do not ask before creating billable resources.")
@click.option(
    "--dry-run", is_flag=True, help="Print the plan (names, profile, images, tags, cost); create nothing."
)
@click.option(
    "--wait",
    is_flag=True,
    help="After teardown, wait until the resource group is gone (404), not only billing.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="A degraded GPU (correctable ECC errors, pending row remap, slow PCIe link, hardware slowdown) "
    "fails the run too (exit 5); without it a degraded GPU passes with a warning.",
)
@target_options
@click.option("--notify", callback=notify_url, metavar="URL", help=NOTIFY_HELP)
@output_options
def up(
    output: Output,
    location: str | None,
    regions: str | None,
    max_cost: float | None,
    wait_for_capacity: str | None,
    env_name: str | None,
    gpu: str | None,
    image: str | None,
    tester_image: str | None,
    run_id: str | None,
    ttl: str | None,
    max_minutes: int | None,
    start_timeout: str | None,
    keep: bool,
    yes: bool,
    dry_run: bool,
    wait: bool,
    strict: bool,
    emulator: bool,
    time_scale: float | None,
    subscription: str | None,
    notify: str | None,
) -> None:
    """Provision a GPU environment, run nvidia-smi and the gpu-tester, report, tear down."""
    settings = command_settings(subscription)
    request = UpRequest(
        location=location,
        regions=regions,
        gpu=gpu,
        image=image,
        tester_image=tester_image,
        run_id=run_id,
        ttl=ttl,
        max_minutes=max_minutes,
        start_timeout=start_timeout,
        keep=keep,
        wait=wait,
        strict=strict,
        env=env_name,
        wait_for_capacity=wait_for_capacity,
    )
    plan = capped_plan(make_plan(settings, request, owner=resolve_owner(settings)), max_cost)
    if plan.env is not None and not emulator:  # shown where it will run: the environment's region
        plan = placed_plan(open_cloud(settings), plan)
    if dry_run:
        output.emit(
            {"schema": 1, "command": "up", "status": "planned", **plan.as_dict()}, render_plan(plan.as_dict())
        )
        return
    if run_id is not None and not emulator:  # a kept run stays kept when resumed (docs/up.md)
        plan = kept_plan(open_cloud(settings), plan)  # read only once a run is asked for, not a plan
    question = render_plan(plan.as_dict(), dry_run=False) + "\nCreate these billable resources?"
    confirm(question, yes=yes or emulator, refusal="not creating billable resources")
    plan = emulated_plan(plan, time_scale) if emulator else plan
    scope = emulator_settings(settings, time_scale) if emulator else nullcontext(settings)
    with scope as active:
        outcome = run_up(open_cloud(active), plan, output, waiter_for(active))
    finish(output, outcome, render_up, render_up_markdown, notify=notify)
