"""`acagpu run --map ITEMS --workers P`: queue mode, the items drained by P workers (docs/queue.md).

Parse, build the QueueSpec (bad input: exit 2 before anything exists), confirm, call `run_queue`,
render. Everything else lives in `workflow/queue/`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

from aca_gpu.errors import AuthError, BadInput
from aca_gpu.output import Output

F = TypeVar("F", bound=Callable[..., Any])
# fan-out flags that mean nothing to a queue run (one execution per shard is what it replaces)
FANOUT_ONLY = (
    "shards",
    "parallel",
    "rerun_failed",
    "retry_on_exit",
    "platform_retries",
    "logs",
    "output_dir",
)


def queue_options(func: F) -> F:
    """The queue-mode flags of `acagpu run` (docs/queue.md)."""
    options = [
        click.option("--workers", type=int, metavar="P",
                     help="Queue mode: --map's items go on a Storage queue that at most P workers drain, "
                     "one item after another (an Event job; needs --env)."),
        click.option("--max-deliveries", type=click.IntRange(1, 100), default=3, show_default=True,
                     help="With --workers: an item tried this often goes to the run's poison queue."),
        click.option("--warm", type=int, default=0, show_default=True, metavar="K",
                     help="With --workers: keep K workers waiting for items (the Event job's "
                     "minExecutions; they bill while they wait: the plan shows the cost per hour)."),
        click.option("--warm-idle", type=int, default=300, show_default=True, metavar="SECONDS",
                     help="With --warm: how long a waiting worker waits for an item before it exits."),
        click.option("--detach", is_flag=True,
                     help="With --workers: return once the items are queued and the job exists; the "
                     "workers drain the queue without this machine (acagpu attach / results RUN_ID)."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def is_queue(flags: dict[str, Any]) -> bool:
    """Queue mode; its flags without --workers are refused here (one line, exit 2)."""
    if flags.get("workers") is not None:
        return True
    alone = [f"--{k}" for k in ("detach", "warm") if flags.get(k)]
    if alone:
        raise BadInput(f"{', '.join(alone)} belongs to queue mode: add --workers P (and --map ITEMS)")
    return False


def run_queue_command(
    output: Output, image: str | None, command: tuple[str, ...], flags: dict[str, Any], make_request: Any
) -> None:
    """The queue branch of `acagpu run` (its own exit code; see workflow/queue/outcome.py)."""
    from aca_gpu.cli.checks import given_flags
    from aca_gpu.workflow.queue.spec import make_queue_spec

    given = given_flags(FANOUT_ONLY)
    if given:
        raise BadInput(
            f"--workers drains a queue: {', '.join(given)} belong to a fan-out (--shards/--map alone)"
        )
    if flags.get("retries"):
        raise BadInput("--workers retries an item by its deliveries: use --max-deliveries, not --retries")
    if image is None:
        raise BadInput("missing IMAGE: acagpu run --map ITEMS --workers P [OPTIONS] IMAGE -- COMMAND ...")
    request = make_request(image, command)
    _execute(output, flags, request, lambda spec: make_queue_spec(
        spec, map_file=flags.get("map_file"), workers=flags["workers"],
        max_deliveries=flags["max_deliveries"], detach=flags["detach"], warm=flags["warm"],
        warm_idle_s=flags["warm_idle"],
    ))  # fmt: skip


def rerun_queue_command(output: Output, image: str | None, flags: dict[str, Any]) -> bool:
    """`--rerun-failed RUN_ID` of a queue run (docs/queue.md); False when RUN_ID is none (a fan-out's
    rerun then takes it). A live (detached) run's failed items go back on its queue; a finished
    attached run's go to a new run, from this machine's record of it."""
    from dataclasses import replace

    from aca_gpu.cli.runopts import command_settings
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.queue import rerun
    from aca_gpu.workflow.queue.spec import make_queue_spec

    run_id = flags["rerun_failed"]
    record = rerun.local_record(run_id)
    if record is not None and not rerun.is_queue_record(record):
        return False  # a fan-out's
    given = [f"--{k.replace('_', '-')}" for k in ("shards", "map_file") if flags.get(k) is not None]
    if image is not None or given:
        raise BadInput(
            "--rerun-failed RUN_ID takes the run's own image, command and items: give nothing else"
        )
    try:
        cloud = open_cloud(command_settings(flags["subscription"]))
    except AuthError as exc:  # no subscription: no detached queue run can be found
        if record is None and exc.code == "NoSubscription":
            return False  # the fan-out's rerun says what this machine holds of RUN_ID
        raise
    live = rerun.live_run(cloud, run_id)
    if live is not None:
        doc = rerun.requeue_failed(live, _say(output))
        output.emit(doc, lambda _stdout: print(
            f"run {run_id}: {len(doc['requeued'])} item(s) back on its queue; follow: acagpu attach {run_id}",
            file=output.stderr, flush=True))  # fmt: skip
        return True
    if record is None:
        raise rerun.not_found(run_id)
    request, options, failed = rerun.failed_of_record(run_id, record)
    if flags["detach"]:
        raise BadInput(
            f"--rerun-failed {run_id}: a rerun of a finished run runs attached (leave out --detach)"
        )
    request = replace(request, run_id=flags.get("run_id"))
    _execute(output, flags, request, lambda spec: make_queue_spec(
        spec, map_file=None, workers=flags["workers"] or int(options.get("workers") or 1),
        max_deliveries=int(options.get("max_deliveries") or flags["max_deliveries"]),
        items=tuple(str(i["item"]) for i in failed), indexes=tuple(int(i["index"]) for i in failed),
        rerun_of=run_id,
    ))  # fmt: skip
    return True


def _say(output: Output) -> Any:
    def say(text: str) -> None:
        if not output.is_json:
            print(f"  {text}", file=output.stderr, flush=True)

    return say


def _execute(output: Output, flags: dict[str, Any], request: Any, make_queue: Any) -> None:
    """Plan, confirm, run, render: one queue run (a new one, or a rerun's)."""
    from dataclasses import replace

    from aca_gpu.cli.runopts import command_settings, launch
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner
    from aca_gpu.workflow.env.warm_runtime import placed_plan
    from aca_gpu.workflow.queue.outcome import render_queue, run_queue
    from aca_gpu.workflow.workload.plan import make_run_spec

    settings = command_settings(flags["subscription"])
    spec = make_run_spec(settings, request, owner=resolve_owner(settings))
    queue = make_queue(spec)
    if queue.run.plan.env is not None and not flags["emulator"]:
        queue = replace(queue, run=replace(queue.run, plan=placed_plan(open_cloud(settings), queue.run.plan)))
    # the document's workers_quota, as the run's own preflight writes it
    shown, said = queue, cast("dict[str, Any] | None", None)
    if not flags["emulator"] and queue.run.plan.env is not None:  # P as the preflight will clamp it
        from aca_gpu.workflow.env.find import find_env
        from aca_gpu.workflow.fanout.clamp import read_clamp

        cloud = open_cloud(settings)
        clamp = read_clamp(cloud, queue.run.plan, queue.workers, find_env(cloud, queue.run.plan.env))
        shown, said = replace(queue, workers=clamp.parallel), {"said": clamp.said, **(clamp.doc or {})}
    doc = {"schema": 1, "command": "run", "mode": "queue", "status": "planned",
           **shown.run.as_dict(), **shown.as_dict(), "workers_quota": said}  # fmt: skip
    if flags["dry_run"]:
        output.emit(doc, render_plan(doc))
        return

    def go(cloud: Any, spec: Any, waiter: Any) -> Any:
        return run_queue(cloud, spec, output, waiter, request=request)

    launch(output, flags, settings, queue, render_plan(doc), queue.run.warnings, go, render_queue)


def render_plan(doc: dict[str, Any]) -> str:
    from aca_gpu.cli.run_plan import render_run_plan

    queue, price = doc["queue"], doc["queue_price"]
    return "\n".join(
        [
            render_run_plan(doc),
            f"  queue mode     {queue['items']} items on a Storage queue, at most {queue['workers']} workers "
            f"(an Event job, KEDA polls every {queue['polling_interval_s']} s); poison after "
            f"{queue['max_deliveries']} deliveries",
            f"  queue price    ${price['usd_per_second_per_worker']:.7f}/s a worker, "
            f"${price['usd_per_second_at_workers']:.7f}/s at --workers (workers bill from start to exit)",
            *([f"  GPU quota      {doc['workers_quota']['said']}"] if doc.get("workers_quota") else []),
        ]
        + (
            [
                f"  warm floor     {queue['warm']} worker(s) kept waiting: "
                f"${price['warm_floor_usd_per_hour']:.4f}/h "
                f"while no item waits; each waits {queue['warm_idle_s']} s for an item before it exits, and "
                "the floor goes when the run is done and read (attach, results) or removed"
            ]
            if queue["warm"]
            else []
        )
    )
