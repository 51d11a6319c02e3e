"""`acagpu serve IMAGE [-- COMMAND]`: a model server on a GPU behind ACA's HTTPS ingress, kept
until its TTL or `acagpu down`; `--measure N` times its cold starts phase by phase."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import click

from aca_gpu.cli.options import confirm, output_options
from aca_gpu.cli.runopts import command_settings, emulator_settings, waiter_for
from aca_gpu.cli.workload_options import (
    container_options,
    limit_options,
    placement_options,
    size_options,
    target_options,
)
from aca_gpu.output import Output
from aca_gpu.units import duration_text


def render_serve(doc: dict[str, Any]) -> str:
    """The human summary (stderr keeps stdout for the document)."""
    lines = [f"serve {doc['run_id']}: {doc['status']}"]
    work, res = doc.get("workload"), doc.get("resources") or {}
    if work:  # the plan (--dry-run): what would be made
        lines += [
            f"  image          {work['image']}",
            f"  command        {' '.join(work['command']) or '(the image default)'}",
            f"  place          {doc.get('env') or doc.get('location')}: group {res.get('resource_group')}, "
            f"app {res.get('app')}",
        ]
    if doc.get("url"):
        lines.append(f"  url            {doc['url']}")
    price = doc.get("price") or {}
    if price.get("usd_per_hour") is not None:
        lines.append(
            f"  price          ${price['usd_per_hour']:.4f}/h while a replica runs ($0 at zero replicas)"
        )
    settings = doc.get("settings") or {}
    lines.append(
        f"  replicas       {settings.get('min_replicas')}-{settings.get('max_replicas')}, "
        f"cooldown {duration_text(settings.get('cooldown_seconds') or 0)}, health {settings.get('health')}"
    )
    first = doc.get("first_answer")
    if first:
        lines.append(f"  first answer   {first['status']} after {duration_text(first['end_to_end_s'])}")
        lines += [f"    {p['phase']:<22} {p['seconds']:>8.3f} s  ({p['clock']})" for p in first["phases"]]
    measured = doc.get("measurement")
    if measured:
        for cycle in measured["cycles"]:
            flag = "  cut off at the ingress timeout" if cycle["cut_off"] else ""
            lines.append(f"  cold cycle {cycle['cycle']}   {duration_text(cycle['end_to_end_s'])}{flag}")
        for name, pct in measured["phase_percentiles"].items():
            lines.append(f"    {name:<22} p50 {pct['p50']} s, p95 {pct['p95']} s")
        warm = measured.get("warm") or {}
        if warm:
            total = warm["total_s"]
            lines.append(
                f"  warm           {warm['requests']} requests: p50 {total['p50']} s, p95 {total['p95']} s, "
                f"p99 {total['p99']} s ({warm['failed']} failed)"
            )
        for remedy in measured.get("remedies") or []:
            lines.append(
                f"  remedy         {remedy['remedy']}: ${remedy['usd_per_month']:.2f}/month ({remedy['why']})"
            )
    used = doc.get("gpu_use") or {}
    if used.get("checked"):
        mib = ", ".join(f"{u} MiB" for u in used["memory_used_mib"])
        lines.append(
            f"  GPU memory     {mib} in use"
            + ("  IDLE: the model is likely on the CPU" if used["idle"] else "")
        )
    elif used.get("note"):
        lines.append(f"  GPU memory     {used['note']}")
    if doc.get("kept"):
        lines.append(f"  delete         {doc['delete']}")
    if doc.get("error"):
        lines.append(f"  error          {doc['error']['message']}")
    return "\n".join(lines)


@click.command(context_settings={"allow_interspersed_args": False})
@click.argument("image", required=False)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="Port the container serves on.",
)
@click.option(
    "--min-replicas",
    type=click.IntRange(0, 1000),
    default=0,
    show_default=True,
    help="Replicas kept warm (0: idle costs nothing).",
)
@click.option(
    "--max-replicas",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Most replicas the HTTP rule scales to.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 10000),
    default=10,
    show_default=True,
    help="Requests per replica before the HTTP rule adds one.",
)
@click.option(
    "--cooldown",
    type=click.IntRange(0, 86400),
    default=300,
    show_default=True,
    help="Seconds after the last request before scaling in.",
)
@click.option("--health", default="/", show_default=True, help="Path whose answer means the model is loaded.")
@click.option(
    "--load-timeout", help="How long the model may take to load, e.g. 20m (default 30m, at most 37m)."
)
@click.option("--measure", type=click.IntRange(0, 100), default=0, help="Time N cold starts phase by phase.")
@click.option(
    "--requests",
    type=click.IntRange(0, 10000),
    default=0,
    help="With --measure: M warm requests (p50/p95/p99).",
)
@click.option(
    "--request-concurrency",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Warm requests at a time.",
)
@placement_options
@limit_options(
    max_cost_help="Spend at most USD on the app: stopped at it while serve runs (exit 8), and its --ttl cut "
    "to what USD pays for at --max-replicas after.",
    wait_help="Wait up to DURATION (e.g. 2h) until the region has room before the app is made: one probe "
    "start per sweep, 30 s growing to 10 min apart, nothing billing; exit 3 at the end.",
)
@container_options(
    env_help="Serve inside the warm environment NAME (`acagpu env create`).",
    mount_help="Mount a storage of the --env environment (Azure Files; repeatable).",
)
@size_options
@click.option(
    "--run-id", help="Run id (1-12 lowercase letters/digits); with --measure alone: measure that app."
)
@click.option(
    "--ttl", help="Expiry in the tags: the reaper and the guard delete the app after it (default 2h)."
)
@click.option("--yes", is_flag=True, help="Do not ask before creating billable resources.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the price per hour; create nothing.")
@target_options
@output_options
def serve(output: Output, image: str | None, command: tuple[str, ...], **flags: Any) -> None:
    """Serve IMAGE over HTTPS on a GPU, scale to zero when idle, measure its cold start.

    A container app with external ingress on --port, an HTTP scale rule and a startup probe; it
    waits for the first answer from --health and prints the URL, the phases and the price per
    hour. The app stays until its --ttl or `acagpu down --run-id NAME --yes`. `--measure N` times
    N cold starts from zero replicas (and `--run-id NAME --measure N` an app already served).
    """
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner
    from aca_gpu.workflow.serve.deploy import measure_served
    from aca_gpu.workflow.serve.deploy import serve as serve_app
    from aca_gpu.workflow.serve.plan import ServeRequest, attached_spec, make_serve_spec

    if command[:1] == ("--",):
        command = command[1:]
    settings = command_settings(flags["subscription"])
    request = ServeRequest(
        image=image,
        command=command,
        gpu=flags["gpu"],
        location=flags["location"],
        run_id=flags["run_id"],
        ttl=flags["ttl"],
        env=flags["env"],
        secret_env=flags["secret_env"],
        cpu=flags["cpu"],
        memory=flags["memory"],
        env_name=flags["env_name"],
        mounts=flags["mount"],
        port=flags["port"],
        min_replicas=flags["min_replicas"],
        max_replicas=flags["max_replicas"],
        concurrency=flags["concurrency"],
        cooldown=flags["cooldown"],
        health=flags["health"],
        load_timeout=flags["load_timeout"],
        measure=flags["measure"],
        requests=flags["requests"],
        request_concurrency=flags["request_concurrency"],
        wait_for_capacity=flags["wait_for_capacity"],
        max_cost=flags["max_cost"],
    )
    owner = resolve_owner(settings)
    attached = image is None and flags["run_id"] is not None and flags["measure"] > 0
    spec = (
        attached_spec(settings, request, owner=owner)
        if attached
        else make_serve_spec(settings, request, owner=owner)
    )
    if flags["dry_run"]:
        doc = {"schema": 1, "command": "serve", "status": "planned", **spec.as_dict()}
        output.emit(
            doc, lambda _stdout: print(render_serve({**doc, "run_id": spec.run_id}), file=output.stderr)
        )
        return
    if not attached:
        price = spec.run.price().get("usd_per_hour")
        question = (
            f"serve {spec.run.workload.image} as {spec.app} (run {spec.run_id}) in "
            f"{spec.run.plan.env or spec.run.plan.location}: ${price}/h while a replica runs, kept until "
            f"its TTL or `acagpu down`.\nCreate these billable resources?"
        )
        confirm(question, yes=flags["yes"] or flags["emulator"], refusal="not creating billable resources")
    scope = emulator_settings(settings, flags["time_scale"]) if flags["emulator"] else nullcontext(settings)
    with scope as active:
        cloud = open_cloud(active)
        verify: str | bool = active.ca_bundle or True
        waiter = waiter_for(active)
        if attached:
            outcome = measure_served(cloud, spec, output, waiter, verify=verify)
        else:
            outcome = serve_app(cloud, replace(spec), output, waiter, verify=verify)
    doc = outcome.document()
    output.emit(doc, lambda _stdout: print(render_serve(doc), file=output.stderr, flush=True))
    if outcome.exit_code:
        raise SystemExit(outcome.exit_code)
