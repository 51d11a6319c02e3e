"""`acagpu env`: warm GPU environments that runs borrow (`up --env NAME`) instead of building one."""

from __future__ import annotations

from typing import Any, TextIO

import click

from aca_gpu.cli.options import confirm, output_options
from aca_gpu.cli.runopts import command_settings, waiter_for
from aca_gpu.errors import EXIT_TEARDOWN, Interrupted
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import open_cloud, resolve_owner
from aca_gpu.workflow.env import detail, lifecycle, room


@click.group()
def env() -> None:
    """Warm GPU environments: build once, run many times at no idle cost (`up --env NAME`)."""


FIXED = (("NAME", "name", 14), ("STATE", "state", 8), ("REGION", "location", 14))
REST = "GPU PROFILES, RUNS INSIDE, LAST USE, EXPIRY, IDLE COST"


def _widths(docs: list[dict[str, Any]]) -> list[int]:
    """Each fixed column as wide as its longest value (a state such as `scheduledfordelete`, a long
    name), never narrower than it has always been: the columns stay aligned whatever a row holds."""
    return [max([least, len(title), *(len(str(d.get(key))) for d in docs)]) for title, key, least in FIXED]


def _line(doc: dict[str, Any], widths: list[int]) -> str:
    profiles = ", ".join(p["type"] for p in doc.get("profiles", []) if p["type"] != "Consumption") or "-"
    runs = ", ".join(r["run_id"] for r in doc.get("runs", [])) or "none"
    cost = lifecycle.idle_text(doc.get("idle_cost"))
    expiry = "expired" if doc.get("expired") else f"expires {doc.get('expires_at')}"
    fixed = " ".join(f"{doc.get(key)!s:<{width}}" for (_, key, _), width in zip(FIXED, widths, strict=True))
    text = f"{fixed} {profiles}  runs: {runs}  last used {doc.get('last_used')}  {expiry}  {cost}"
    text += f"  ({doc['error']})" if doc.get("error") else ""
    staged = doc.get("staged") or {}
    for item in staged.get("images") or []:
        size = f", {item['bytes'] / 1e9:.2f} GB" if item.get("bytes") else ""
        streamed = ", streaming artifact" if item.get("streaming") == "converted" else ""
        text += f"\n  staged {item['image']} -> {item['staged_as']}{size}{streamed}"
    return text


def _header(widths: list[int]) -> str:
    return (
        " ".join(f"{title:<{width}}" for (title, _, _), width in zip(FIXED, widths, strict=True)) + f" {REST}"
    )


def _render(docs: list[dict[str, Any]]) -> Any:
    widths = _widths(docs)

    def human(stream: TextIO) -> None:
        if not docs:
            print("no warm environments (`acagpu env create NAME -l REGION` makes one)", file=stream)
        else:
            print(_header(widths), file=stream)
        for doc in docs:
            print(_line(doc, widths), file=stream)
        for basis in dict.fromkeys((d.get("idle_cost") or {}).get("basis") for d in docs):
            if basis:
                print(f"idle cost: {basis}", file=stream)

    return human


@env.command()
@click.argument("name")
@click.option("-l", "--location", help="Azure region (default: settings, else eastus).")
@click.option("--gpu", help="Serverless GPU profiles it offers, e.g. t4,a100 (default t4).")
@click.option("--idle-ttl", help="Removed by reap/guard after this long unused, e.g. 7d, 12h (default 7d).")
@click.option(
    "--wait-for-capacity",
    metavar="DURATION",
    help="Then wait up to DURATION (e.g. 2h) until each GPU can place a replica there: one probe start "
    "per sweep, 30 s growing to 10 min apart; exit 3 at the end (the environment stays).",
)
@click.option("--yes", is_flag=True, help="Do not ask before creating it.")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def create(
    output: Output,
    name: str,
    location: str | None,
    gpu: str | None,
    idle_ttl: str | None,
    wait_for_capacity: str | None,
    yes: bool,
    subscription: str | None,
) -> None:
    """Create (or finish) a warm environment: a tagged group with one serverless-only environment.

    It costs nothing while no replica runs; every run that uses it renews its idle TTL."""
    settings = command_settings(subscription)
    plan = lifecycle.make_env_plan(
        settings,
        name,
        location=location,
        gpus=gpu,
        idle_ttl=idle_ttl,
        owner=resolve_owner(settings),
        wait_for_capacity=wait_for_capacity,
    )
    profiles = ", ".join(t for _, t in plan.profiles())
    confirm(
        f"Create warm environment {name} in {plan.location} ({profiles}; $0/h while idle)?",
        yes=yes,
        refusal=f"not creating environment {name}",
    )
    try:
        doc = room.create(open_cloud(settings), plan, output, waiter_for(settings))
    except KeyboardInterrupt:  # what was made stays: say so, and how to finish or remove it
        raise Interrupted(
            f"interrupted: environment {name} may be partly made in {plan.names.resource_group}",
            hint=f"`acagpu env create {name} -l {plan.location} --yes` finishes it; "
            f"`acagpu env delete {name} --yes` removes it",
        ) from None
    output.emit({"schema": 1, **doc}, _render([doc]))


@env.command(name="list")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def list_(output: Output, subscription: str | None) -> None:
    """List warm environments: profiles, runs inside now, last use, expiry and idle cost."""
    with output.step("read environments and the runs inside them") as step:
        docs = lifecycle.list_envs(open_cloud(command_settings(subscription)))
        step.update(f"{len(docs)} environment(s)")
    output.emit({"schema": 1, "environments": docs}, _render(docs))


@env.command()
@click.argument("name")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def show(output: Output, name: str, subscription: str | None) -> None:
    """Show one warm environment in detail: region, profiles, storages, the runs inside it now and
    their spend so far, idle TTL and idle cost."""
    # the environment's jobs and executions are read to list its runs and their spend: retried or
    # slow reads must not be silent
    with output.step(f"read environment {name} and the runs inside it"):
        doc = detail.show(open_cloud(command_settings(subscription)), name)
    output.emit({"schema": 1, **doc}, lambda stream: print(detail.render(doc), file=stream))


@env.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Delete even while runs are inside (their jobs go too).")
@click.option("--wait", is_flag=True, help="Wait until the resource group is gone (404).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")
@output_options
def delete(output: Output, name: str, force: bool, wait: bool, yes: bool, subscription: str | None) -> None:
    """Delete a warm environment; refused while a run is inside it unless --force. Exit 6 if
    something could not be removed."""
    confirm(f"Delete warm environment {name}?", yes=yes, refusal=f"not deleting environment {name}")
    settings = command_settings(subscription)
    poll = max(0.05, waiter_for(settings).interval)
    doc = lifecycle.delete_env(open_cloud(settings), name, output, force=force, wait=wait, poll=poll)

    def human(stream: TextIO) -> None:
        print(f"environment {name}: {doc['resource_group']} {doc['teardown']['status']}", file=stream)

    output.emit({"schema": 1, **doc}, human)
    if doc["teardown"]["status"] not in ("deleted", "deleting", "absent"):
        raise SystemExit(EXIT_TEARDOWN)
