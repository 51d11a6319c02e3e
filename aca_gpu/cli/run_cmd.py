"""`acagpu run IMAGE [-- COMMAND ARGS...]`: the user's own container on a GPU, like `docker run`."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from aca_gpu.cli.fanout_cmd import fanout_options, is_fanout, run_fanout_command
from aca_gpu.cli.options import confirm, output_options
from aca_gpu.cli.queue_cmd import is_queue, queue_options, rerun_queue_command, run_queue_command
from aca_gpu.cli.run_plan import render_run_plan
from aca_gpu.cli.runopts import command_settings, emulator_settings, waiter_for
from aca_gpu.cli.workload_options import (
    container_options,
    limit_options,
    placement_options,
    size_options,
    target_options,
)
from aca_gpu.output import Output

if TYPE_CHECKING:
    from aca_gpu.workflow.workload.plan import RunRequest


def _request(image: str, command: tuple[str, ...], flags: dict[str, Any]) -> RunRequest:
    """The RunRequest of `run`'s flags (one container, or each shard of a fan-out)."""
    from aca_gpu.workflow.workload.plan import RunRequest

    return RunRequest(
        image=image,
        command=command,
        runtime=flags["runtime"],
        gpu=flags["gpu"],
        location=flags["location"],
        regions=flags["regions"],
        run_id=flags["run_id"],
        ttl=flags["ttl"],
        max_minutes=flags["max_minutes"],
        start_timeout=flags["start_timeout"],
        env=flags["env"],
        secret_env=flags["secret_env"],
        cpu=flags["cpu"],
        memory=flags["memory"],
        registry_identity=flags["registry_identity"],
        registry_username=flags["registry_username"],
        registry_password_env=flags["registry_password_env"],
        gpus=flags["gpus"],
        podman_gpu=flags["podman_gpu"],
        env_name=flags["env_name"],
        mounts=flags["mount"],
        create_share=flags["create_share"],
        wait_for_capacity=flags["wait_for_capacity"],
    )


@click.command(context_settings={"allow_interspersed_args": False})
@click.argument("image", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--runtime",
    type=click.Choice(["aca", "docker", "podman", "apptainer"]),
    default="aca",
    show_default=True,
    help="Where it runs: Azure Container Apps, or this machine's Docker, Podman or Apptainer.",
)
@placement_options
@click.option("--regions", help="Regions to try in order, e.g. eastus,westus3 (instead of -l).")
@limit_options(
    max_cost_help="Spend at most USD on this run (shards and retries included): nothing new starts past it "
    "less one start's cost, and what runs is stopped at it (exit 8).",
    wait_help="Wait up to DURATION (e.g. 2h) while no region allowed has capacity: sweep them again, 30 s "
    "growing to 10 min apart, nothing billing in between; exit 3 with each region's reason at the end.",
)
@container_options(
    env_help="Run inside the warm environment NAME (`acagpu env create`): only the run's job comes and goes.",
    mount_help="Mount an environment storage (Azure Files; with --env) or, locally, a folder (repeatable).",
)
@click.option(
    "--create-share",
    is_flag=True,
    help="With --env: make a --mount's Azure Files share (and its storage account) when the environment "
    "lacks it; it stays with the environment.",
)
@size_options
@click.option("--registry-identity", help="Managed identity (resource id, or `system`) that pulls the image.")
@click.option("--registry-username", help="User name for a private registry.")
@click.option(
    "--registry-password-env", metavar="NAME", help="Environment variable holding the registry password."
)
@click.option(
    "--gpus", default="all", show_default=True, help="Local runtimes: all, a count, device=0,2, or none."
)
@click.option(
    "--podman-gpu",
    type=click.Choice(["cdi", "hook"]),
    default="cdi",
    show_default=True,
    help="How Podman gets the GPU (`acagpu doctor --write-cdi` makes the CDI spec).",
)
@click.option("--run-id", help="Run id (1-12 lowercase letters/digits).")
@click.option("--ttl", help="Expiry in the tags, for the reaper and the guard (default 2h).")
@click.option(
    "--max-minutes",
    type=click.IntRange(1, 1440),
    help="Stop the container after this long, exit 4 (default 30).",
)
@click.option("--start-timeout", help="How long the replica may take to start, e.g. 15m (default).")
@click.option("--yes", is_flag=True, help="Do not ask before creating billable resources.")
@click.option(
    "--dry-run", is_flag=True, help="Print the plan, the price per second and the ceiling; create nothing."
)
@target_options
@fanout_options
@queue_options
@output_options
def run(output: Output, image: str | None, command: tuple[str, ...], **flags: Any) -> None:
    """Run IMAGE (and COMMAND) on a GPU, stream its output, exit with its code, tear down.

    Like `docker run`: stdout and stderr stream live, acagpu exits with the container's exit
    code when it ran; acagpu's own failures keep their codes (2 bad input, 3 quota, 4 --max-minutes
    or a replica that never started, 5 the container did not start, 6 teardown incomplete, 7
    infrastructure, 130 Ctrl-C) and the JSON document's `exit_code_from` says which it was.
    acagpu's options go before IMAGE; everything after IMAGE (or after `--`) is the command.
    """
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner
    from aca_gpu.workflow.env.warm_runtime import placed_plan
    from aca_gpu.workflow.workload.outcome import render_run, render_run_markdown
    from aca_gpu.workflow.workload.plan import capped, make_run_spec
    from aca_gpu.workflow.workload.run import run_aca, run_local

    if command[:1] == ("--",):  # `IMAGE -- COMMAND`: the separator is not part of the command
        command = command[1:]
    if flags.get("rerun_failed") and rerun_queue_command(output, image, flags):  # a queue run's rerun
        return
    if is_queue(flags):  # --map ITEMS --workers P: a queue that P workers drain (docs/queue.md)
        run_queue_command(output, image, command, flags, lambda i, c: _request(i, c, flags))
        return
    if is_fanout(flags):  # --shards, --map, --rerun-failed: one execution per shard (docs/fanout.md)
        run_fanout_command(output, image, command, flags, lambda i, c: _request(i, c, flags))
        return
    if image is None:
        raise click.UsageError("Missing argument 'IMAGE'.")
    settings = command_settings(flags["subscription"])
    request = _request(image, command, flags)
    spec = capped(make_run_spec(settings, request, owner=resolve_owner(settings)), flags["max_cost"])
    if spec.plan.env is not None and not spec.local and not flags["emulator"]:
        spec = replace(spec, plan=placed_plan(open_cloud(settings), spec.plan))  # the environment's region
    if flags["dry_run"]:
        doc = {"schema": 1, "command": "run", "status": "planned", **spec.as_dict()}
        output.emit(doc, render_run_plan(doc))
        return
    for warning in spec.warnings:
        output.warn(warning)
    if spec.local:
        outcome = run_local(spec, output)
    else:
        question = render_run_plan(spec.as_dict()) + "\nCreate these billable resources?"
        confirm(question, yes=flags["yes"] or flags["emulator"], refusal="not creating billable resources")
        scope = (
            emulator_settings(settings, flags["time_scale"]) if flags["emulator"] else nullcontext(settings)
        )
        with scope as active:
            outcome = run_aca(open_cloud(active), spec, output, waiter_for(active))
    doc = outcome.document()
    output.emit(doc, lambda _stdout: print(render_run(doc), file=output.stderr, flush=True))
    output.summary(render_run_markdown(doc))
    if outcome.exit_code:
        raise SystemExit(outcome.exit_code)
