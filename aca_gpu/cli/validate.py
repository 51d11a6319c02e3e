"""`acagpu validate`: CUDA image(s) × GPU profile(s), pass/fail with the reason, always torn down."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import click

from aca_gpu.cli.options import NOTIFY_HELP, confirm, notify_url, output_options
from aca_gpu.cli.runopts import command_settings, emulated_plan, emulator_settings, waiter_for
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import open_cloud, resolve_owner
from aca_gpu.workflow.tester import report as report_flow
from aca_gpu.workflow.tester import validate as validate_flow
from aca_gpu.workflow.tester.render import finish, render_plan, render_validate


@click.command()
@click.option(
    "--image", "images", multiple=True, required=True, help="CUDA image to test; repeat for several."
)
@click.option("--gpu", "gpus", multiple=True, required=True, help="GPU alias (t4, a100, ...); repeat.")
@click.option("-l", "--location", help="Azure region (default: settings, else eastus).")
@click.option(
    "--regions",
    help="Regions to try in order, e.g. eastus,westus3: a region that cannot place the run is cleaned "
    "up and the next one used (default: -l only; for a100 without -l, a documented order).",
)
@click.option(
    "--wait-for-capacity",
    metavar="DURATION",
    help="Wait up to DURATION (e.g. 2h) while no region allowed has capacity: sweep them again, 30 s "
    "growing to 10 min apart, nothing billing in between; exit 3 with each region's reason at the end.",
)
@click.option(
    "--env",
    "env_name",
    help="Run every pair inside this warm environment (`acagpu env create`); only the run's jobs "
    "are made and removed (default: the `env` setting).",
)
@click.option("--run-id", help="Run id (1-12 lowercase letters/digits).")
@click.option("--ttl", help="Expiry tag for the reaper, e.g. 90m (default 2h).")
@click.option("--max-minutes", type=click.IntRange(1, 1440), help="Deadline per tester run (default 20).")
@click.option("--start-timeout", help="How long a replica may take to start, e.g. 10m (default).")
@click.option("--tester-image", help="gpu-tester image (default: stock PyTorch image + injected tester).")
@click.option("--driver", help="Host driver to predict against (default: the last one seen for the profile).")
@click.option("--no-tester", is_flag=True, help="Only start the image and read nvidia-smi.")
@click.option("--no-inspect", is_flag=True, help="Do not read digests and CUDA env from the registry.")
@click.option("--wait", is_flag=True, help="After teardown, wait until the resource group is gone (404).")
@click.option(
    "--strict",
    is_flag=True,
    help="A degraded GPU (correctable ECC errors, pending row remap, slow PCIe link, hardware slowdown) "
    "fails the run too (exit 5); without it a degraded GPU passes with a warning.",
)
@click.option("--yes", is_flag=True, help="Do not ask before creating billable resources.")
@click.option("--emulator", is_flag=True, help="Run against the embedded emulator instead of Azure.")
@click.option("--time-scale", type=click.FloatRange(min=0.0001), help="Emulator speed (default 0.02).")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@click.option("--notify", callback=notify_url, metavar="URL", help=NOTIFY_HELP)
@output_options
def validate(
    output: Output,
    images: tuple[str, ...],
    gpus: tuple[str, ...],
    location: str | None,
    regions: str | None,
    wait_for_capacity: str | None,
    env_name: str | None,
    run_id: str | None,
    ttl: str | None,
    max_minutes: int | None,
    start_timeout: str | None,
    tester_image: str | None,
    driver: str | None,
    no_tester: bool,
    no_inspect: bool,
    wait: bool,
    strict: bool,
    yes: bool,
    emulator: bool,
    time_scale: float | None,
    subscription: str | None,
    notify: str | None,
) -> None:
    """Validate CUDA images on ACA GPU profiles; exit 5 if any pair fails.

    Every (image, GPU) pair shares one environment and runs concurrently; everything is
    deleted at the end, even on failure or Ctrl-C.
    """
    settings = command_settings(subscription)
    request = validate_flow.ValidateRequest(
        images=images,
        gpus=gpus,
        location=location,
        regions=regions,
        run_id=run_id,
        ttl=ttl,
        max_minutes=max_minutes,
        start_timeout=start_timeout,
        tester_image=tester_image,
        driver=driver,
        run_tester=not no_tester,
        wait=wait,
        strict=strict,
        env=env_name,
        wait_for_capacity=wait_for_capacity,
    )
    plan = validate_flow.make_plan(settings, request, owner=resolve_owner(settings))
    question = render_plan(plan.as_dict(), dry_run=False) + "\nCreate these billable resources?"
    confirm(question, yes=yes or emulator, refusal="not creating billable resources")
    inspector = None if (no_inspect or emulator) else validate_flow.registry_inspector
    plan = emulated_plan(plan, time_scale) if emulator else plan
    scope = emulator_settings(settings, time_scale) if emulator else nullcontext(settings)
    with scope as active:
        outcome = validate_flow.validate(open_cloud(active), plan, output, waiter_for(active), inspector)
    results = [p.as_dict() for p in outcome.pairs]
    if results and output.github:
        for pair in report_flow.Matrix(tuple(results)).failed:
            output.error(f"{pair['image']} on {pair['gpu']}: {pair.get('reason') or 'failed'}")

    def markdown(doc: dict[str, Any]) -> str:
        return (
            report_flow.render_markdown(report_flow.Matrix(tuple(doc["results"]))) if doc["results"] else ""
        )

    finish(output, outcome, render_validate, markdown, notify=notify)
