"""`acagpu run --shards N | --map FILE | --rerun-failed RUN_ID`: the fan-out options of `run`.

Parse, build the FanoutSpec (bad input: exit 2 before anything exists), confirm, call
`run_fanout`, render. Everything else lives in `workflow/fanout/`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from aca_gpu.errors import BadInput
from aca_gpu.output import Output

F = TypeVar("F", bound=Callable[..., Any])


def fanout_options(func: F) -> F:
    """The fan-out flags of `acagpu run` (docs/fanout.md)."""
    options = [
        click.option("--shards", type=int, metavar="N",
                     help="Fan out: N executions of IMAGE, shard k gets ACAGPU_SHARD_INDEX=k (0..N-1)."),
        click.option("--map", "map_file", metavar="FILE",
                     help="Fan out over FILE's items (one a line, or a JSON array): item k is ACAGPU_ITEM."),
        click.option("--parallel", type=int, metavar="P",
                     help="At most P shards at once (default 10; clamped to the free GPU quota)."),
        click.option("--retries", type=int, default=0, show_default=True,
                     help="Retries of a shard whose container failed (the platform's failures never count)."),
        click.option("--retry-on-exit", metavar="CODES",
                     help="With --retries: retry only these exit codes, e.g. 1,137."),
        click.option("--platform-retries", type=click.IntRange(0, 20), default=3, show_default=True,
                     help="Retries of a shard the platform failed (never placed, stalled, replica lost)."),
        click.option("--logs", type=click.Choice(["all", "failed", "none"]), default="all", show_default=True,
                     help="Shard output, prefixed [k]: every line, only failed shards', or none."),
        click.option("--output-dir", metavar="DIR",
                     help="Shards write into $ACAGPU_OUTPUT_DIR; the files come back into DIR/k (--env)."),
        click.option("--rerun-failed", metavar="RUN_ID",
                     help="Run again only the shards of fan-out RUN_ID that did not succeed."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def is_fanout(flags: dict[str, Any]) -> bool:
    return any(flags.get(k) is not None for k in ("shards", "map_file", "rerun_failed"))


def run_fanout_command(
    output: Output, image: str | None, command: tuple[str, ...], flags: dict[str, Any], make_request: Any
) -> None:
    """The fan-out branch of `acagpu run` (its own exit code; see workflow/fanout/outcome.py)."""
    from dataclasses import replace

    from aca_gpu.cli.runopts import command_settings, launch
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner
    from aca_gpu.workflow.env.warm_runtime import placed_plan
    from aca_gpu.workflow.fanout import ledger
    from aca_gpu.workflow.fanout.outcome import render_fanout
    from aca_gpu.workflow.fanout.run import run_fanout
    from aca_gpu.workflow.fanout.spec import make_fanout
    from aca_gpu.workflow.workload.plan import capped, make_run_spec

    settings = command_settings(flags["subscription"])
    rerun = flags.get("rerun_failed")
    items = None
    indexes = None
    opts: dict[str, Any] = {}
    if rerun is not None:
        if image is not None or flags.get("shards") is not None or flags.get("map_file") is not None:
            raise BadInput(
                "--rerun-failed RUN_ID takes the run's own image, command and shards: give nothing else"
            )
        request, opts, indexes = ledger.load_failed(rerun)
        items = tuple(opts["items"]) if opts.get("items") is not None else None
        request = replace(
            request, run_id=flags.get("run_id"), wait_for_capacity=flags.get("wait_for_capacity")
        )
    else:
        if image is None:
            raise BadInput("missing IMAGE: acagpu run [OPTIONS] IMAGE [-- COMMAND ...]")
        request = make_request(image, command)
    spec = capped(make_run_spec(settings, request, owner=resolve_owner(settings)), flags.get("max_cost"))
    fanout = make_fanout(
        spec,
        shards=opts.get("count") if rerun is not None and items is None else flags.get("shards"),
        map_file=flags.get("map_file"),
        items=items,
        indexes=indexes,
        parallel=flags["parallel"] if flags.get("parallel") is not None else opts.get("parallel"),
        retries=flags["retries"] if flags["retries"] else int(opts.get("retries") or 0),
        retry_on_exit=flags.get("retry_on_exit") or opts.get("retry_on_exit"),
        platform_retries=flags["platform_retries"],
        logs=flags["logs"],
        output_dir=flags.get("output_dir") or opts.get("output_dir"),
        rerun_of=rerun,
    )
    if fanout.run.plan.env is not None and not flags["emulator"]:
        fanout = replace(
            fanout, run=replace(fanout.run, plan=placed_plan(open_cloud(settings), fanout.run.plan))
        )
    shown, quota = fanout, None
    if not flags["emulator"]:  # P as the run's preflight will clamp it to the free GPU quota
        from aca_gpu.workflow.fanout.clamp import planned

        shown, clamp = planned(open_cloud(settings), fanout)
        quota = {"said": clamp.said, **(clamp.doc or {})}
    doc = {"schema": 1, "command": "run", "mode": "fanout", "status": "planned",
           **shown.run.as_dict(), **shown.as_dict()}  # fmt: skip
    doc["shards"]["quota"] = quota
    if flags["dry_run"]:
        output.emit(doc, render_plan(doc))
        return

    def go(cloud: Any, spec: Any, waiter: Any) -> Any:
        return run_fanout(cloud, spec, output, waiter, request=request)

    launch(output, flags, settings, fanout, render_plan(doc), fanout.warnings, go, render_fanout)


def render_plan(doc: dict[str, Any]) -> str:
    from aca_gpu.cli.run_plan import render_run_plan

    shards, price = doc["shards"], doc["fanout_price"]
    which = (
        "every shard" if shards["indexes"] == "all" else f"shards {', '.join(map(str, shards['indexes']))}"
    )
    lines = [
        render_run_plan(doc),
        f"  shards         {shards['started']} of {shards['count']} ({which}); "
        f"at most {shards['parallel']} at once" + (" (one per --map item)" if shards["map"] else ""),
        *([f"  GPU quota      {shards['quota']['said']}"] if shards.get("quota") else []),
        f"  retries        {shards['retries']} for a failed container"
        + (f" (exit {shards['retry_on_exit']})" if shards["retry_on_exit"] else "")
        + f"; {shards['platform_retries']} for the platform's failures",
        f"  fan-out price  ${price['usd_per_second_per_shard']:.7f}/s a shard, "
        f"${price['usd_per_second_at_parallel']:.7f}/s at --parallel; ceiling ≈ ${price['ceiling_usd']:.2f} "
        f"({price['ceiling_basis']})"
        + (f"; cap ${price['max_cost_usd']:g} (--max-cost)" if "max_cost_usd" in price else ""),
        f"  wall time      at most ≈ {price['wall_time_ceiling_s'] / 60:.0f} min "
        f"({price['rounds_at_parallel']} rounds of start timeout + --max-minutes)",
    ]
    if shards["output_dir"]:
        lines.append(f"  outputs        $ACAGPU_OUTPUT_DIR of shard k → {shards['output_dir']}/k")
    return "\n".join(lines)
