"""`acagpu guard`: a scheduled reaper inside Azure, so expired runs go away without a laptop or CI."""

from __future__ import annotations

from typing import TextIO

import click

from aca_gpu.cli.options import NOTIFY_HELP, confirm, notify_url, output_options
from aca_gpu.cli.runopts import command_settings
from aca_gpu.output import Output
from aca_gpu.workflow.ci.ci_init import ROLE_NAME
from aca_gpu.workflow.guard import manage as guard_flow


@click.group()
def guard() -> None:
    """A scheduled reaper in Azure: deletes expired runs without a laptop or CI."""


@guard.command()
@click.option("-l", "--location", required=True, help="Azure region for the guard's environment.")
@click.option(
    "--every",
    default=guard_flow.DEFAULT_EVERY,
    show_default=True,
    help="How often the guard runs; a period dividing an hour or a day (5m, 15m, 1h, 24h).",
)
@click.option("--dry-run", is_flag=True, help="The guard only logs what it would delete.")
@click.option(
    "--image",
    default=guard_flow.DEFAULT_IMAGE,
    show_default=True,
    help="Stock Python image the guard script is injected into (nothing is built or pushed).",
)
@click.option("--subscription", help="Subscription to guard (default: the configured one).")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    metavar="/subscriptions/ID",
    help="A further subscription to guard (repeatable): the same role is assigned there.",
)
@click.option("--notify", callback=notify_url, metavar="URL", help=NOTIFY_HELP)
@click.option("--yes", is_flag=True, help="Do not ask before the subscription-scope role assignment.")
@output_options
def install(
    location: str,
    every: str,
    dry_run: bool,
    image: str,
    subscription: str | None,
    scopes: tuple[str, ...],
    notify: str | None,
    yes: bool,
    output: Output,
) -> None:
    """Install the guard: in its own resource group (tagged acagpu:keep=true, so no reaper touches
    it), a Consumption-only environment and a scheduled job that deletes expired acagpu:managed=true
    groups with the rules of `acagpu reap`. Its managed identity gets the "acagpu runner" role at
    subscription scope, in every --scope subscription too; without the right to assign roles there
    nothing is created (exit 2) and the commands an administrator must run are printed. With
    --notify, each run that deletes (or fails to) posts one message. Running it again updates it."""
    request = guard_flow.InstallRequest(
        location=location, every=every, dry_run=dry_run, image=image, scopes=scopes, notify=notify
    )
    guard_flow.every_to_cron(every)  # bad input before any Azure call
    confirm(
        f"This creates {guard_flow.RESOURCE_GROUP} in {location} with a scheduled job, and gives the "
        f"job's identity the role {ROLE_NAME!r} on the whole subscription"
        + (f" and on {len(scopes)} more (--scope)" if scopes else "")
        + ": it "
        + ("lists" if dry_run else "deletes")
        + " expired acagpu:managed=true resource groups. Install the guard?",
        yes=yes,
        refusal="not installing the guard",
    )
    doc = guard_flow.install(command_settings(subscription), request, progress=output)

    def human(stream: TextIO) -> None:
        mode = "dry run: logs what it would delete" if doc["dry_run"] else "deletes expired runs"
        print(f"guard {doc['job']} installed in {doc['resource_group']} ({doc['location']})", file=stream)
        print(f"schedule {doc['cron']} (every {doc['every']}); {mode}", file=stream)
        print(
            f"identity {doc['principal_id']} has role {doc['role']['name']!r} on "
            + ", ".join(doc["role_scopes"]),
            file=stream,
        )
        if doc.get("notify"):
            print(f"each run that acts posts to {doc['notify']}", file=stream)

    output.emit(doc, human)


@guard.command()
@click.option("--subscription", help="Subscription (default: the configured one).")
@click.option(
    "--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Executions to show."
)
@output_options
def status(subscription: str | None, limit: int, output: Output) -> None:
    """Show the guard: schedule, identity, what its last run deleted, its recent executions."""
    doc = guard_flow.status(command_settings(subscription), limit=limit)

    def human(stream: TextIO) -> None:
        print(guard_flow.render_status(doc), file=stream)

    output.emit(doc, human)


@guard.command()
@click.option("--subscription", help="Subscription (default: the configured one).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@output_options
def uninstall(subscription: str | None, yes: bool, output: Output) -> None:
    """Remove the guard: its role assignments, then its resource group (verified gone). Exit 6 if
    something could not be removed."""
    confirm(
        f"Remove the guard ({guard_flow.RESOURCE_GROUP} and its role assignments)?",
        yes=yes,
        refusal="not removing the guard",
    )
    doc = guard_flow.uninstall(command_settings(subscription), progress=output)

    def human(stream: TextIO) -> None:
        print(f"removed {len(doc['role_assignments_removed'])} role assignment(s)", file=stream)
        print(f"{doc['resource_group']}: {doc['teardown']['status']}", file=stream)

    output.emit(doc, human)
    if doc["teardown"]["status"] not in ("deleted", "absent"):
        from aca_gpu.errors import EXIT_TEARDOWN

        raise SystemExit(EXIT_TEARDOWN)
