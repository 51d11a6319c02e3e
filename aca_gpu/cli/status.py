"""`acagpu status`: the runs in the subscription, found by their tags."""

from __future__ import annotations

from typing import Any, TextIO

import click

from aca_gpu.cli.options import guid, output_options
from aca_gpu.cli.render import per_subscription, table
from aca_gpu.cli.runopts import command_settings
from aca_gpu.output import Output
from aca_gpu.units import duration_text, usd_text
from aca_gpu.workflow.base.context import open_cloud
from aca_gpu.workflow.env.lifecycle import idle_text
from aca_gpu.workflow.fleet.groups import Scope, cloud_source, find_groups
from aca_gpu.workflow.fleet.status import fleet_status
from aca_gpu.workflow.fleet.status import status as run_status
from aca_gpu.workflow.spend.so_far import UNCOUNTED


def _phase(run: dict[str, Any]) -> str:
    """The phase and how far it is: `building (environment InProgress)`, `queued (shards 20: queued
    12 · ended 8)`, `running (1 of 3 executions)`; a served app's replicas (it has no executions)."""
    served = run.get("served")
    if served and isinstance(served.get("replicas"), int):
        count = served["replicas"]
        return f"serving ({count} replica{'' if count == 1 else 's'})" if count else "scaled-to-zero"
    phase = str(run["phase"])
    if run.get("phase_detail"):
        return f"{phase} ({run['phase_detail']})"
    counted = run.get("executions") or {}
    live = (counted.get("running") or 0) + (counted.get("starting") or 0)
    ended = counted.get("ended") or 0
    if live and live + ended > 1:
        return f"{phase} ({live} of {live + ended} executions)"
    return phase


def render_runs(doc: dict[str, Any], stream: TextIO) -> None:
    runs = doc["runs"]
    for env in (doc.get("environments") or {}).get("warm") or []:
        inside = ", ".join(r["run_id"] for r in env.get("runs") or []) or "no run"
        expiry = (
            "expired (reap removes it when idle)"
            if env.get("expired")
            else f"expires {env.get('expires_at')}"
        )
        cost = idle_text(env.get("idle_cost"))
        print(
            f"warm environment {env['name']} ({env['location']}): {env['state']}, {inside}, {expiry}, {cost}",
            file=stream,
        )
    if not runs:
        print("no acagpu runs found", file=stream)
        return
    fleet = "subscriptions" in doc
    for subscription, group in per_subscription(runs) if fleet else [("", runs)]:
        if subscription:
            print(f"subscription {subscription}", file=stream)
        print(_runs_table(group, stream), file=stream)
        for run in group:  # a served app: where it answers and how many replicas bill now
            served = run.get("served")
            if served:
                spent = served.get("usd_estimate")
                print(
                    f"served {run['run_id']}: {served.get('url') or served.get('error')}, "
                    f"{served.get('replicas')} replica(s) running"
                    + (f", replicas ≈{usd_text(spent)} so far" if isinstance(spent, int | float) else ""),
                    file=stream,
                )
    from aca_gpu.cost import load_prices

    print(f"SPEND≈: list-price estimate of the GPU time billed so far ({load_prices().label})", file=stream)
    if any(run["cost"].get("uncounted") for run in runs):
        print("SPEND≈ ending in +: at least this much; " + UNCOUNTED, file=stream)
    if fleet:
        print(
            f"{len(runs)} run(s) in {len(doc['subscriptions'])} subscription(s) (Azure Resource Graph)",
            file=stream,
        )


def _runs_table(runs: list[dict[str, Any]], stream: TextIO) -> str:
    rows = []
    for run in runs:
        usd = run["cost"].get("usd_estimate")
        expires = run.get("expires_in_seconds")
        rows.append(
            [
                run["run_id"],
                run["resource_group"],
                run.get("location") or "?",
                run.get("gpu") or "?",
                duration_text(run.get("age_seconds")),
                "expired" if expires is not None and expires <= 0 else duration_text(expires),
                _phase(run),
                usd_text(usd if isinstance(usd, int | float) else None)
                + ("+" if run["cost"].get("uncounted") else ""),
            ]
        )
    headers = ["RUN", "GROUP", "LOCATION", "GPU", "AGE", "EXPIRES", "PHASE", "SPEND≈"]
    # the phase folds rather than loses its bracket: how far a run is matters most to who watches it
    return table(headers, rows, stream=stream, wrap="PHASE", right=("AGE", "EXPIRES", "SPEND≈"))


@click.command()
@click.option(
    "--subscription",
    "subscriptions",
    multiple=True,
    callback=guid,
    help="Subscription id (default: ACAGPU_SUBSCRIPTION); repeat for several (one Resource Graph query).",
)
@click.option(
    "--all-subscriptions",
    is_flag=True,
    help="Every subscription the credential can see, in one Azure Resource Graph query.",
)
@output_options
def status(output: Output, subscriptions: tuple[str, ...], all_subscriptions: bool) -> None:
    """List acagpu runs: age, expiry, phase and estimated spend so far."""
    scope = Scope(tuple(dict.fromkeys(s.lower() for s in subscriptions)), all_subscriptions)
    # each run's jobs and executions are read to price it: retried or slow reads must not be silent
    with output.step("read runs and their spend") as step:
        if scope.uses_graph:
            settings = command_settings()
            doc = fleet_status(find_groups(settings, scope), cloud_source(settings))
        else:
            doc = run_status(open_cloud(command_settings(subscriptions[0] if subscriptions else None)))
        step.update(f"{len(doc['runs'])} run(s)")
    output.emit(doc, lambda stream: render_runs(doc, stream))
