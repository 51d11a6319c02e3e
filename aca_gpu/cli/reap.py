"""`acagpu reap`: the scheduled janitor for expired acagpu resource groups (dry-run unless --yes)."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from aca_gpu.cli.options import NOTIFY_HELP, confirm, duration, guid, non_empty, notify_url, output_options
from aca_gpu.cli.runopts import command_settings
from aca_gpu.naming import parse_ttl
from aca_gpu.output import Output
from aca_gpu.workflow.base.notify import reap_message
from aca_gpu.workflow.fleet import reap as reap_flow
from aca_gpu.workflow.fleet.groups import Scope
from aca_gpu.workflow.tester.render import send


@click.command()
@click.option(
    "--subscription",
    "subscriptions",
    multiple=True,
    callback=guid,
    help="Subscription to sweep; repeat for several (default: the configured one). Several are "
    "found with one Azure Resource Graph query.",
)
@click.option(
    "--all-subscriptions",
    is_flag=True,
    help="Sweep every subscription the credential can see (one Azure Resource Graph query).",
)
@click.option(
    "--older-than",
    callback=duration,
    help="Also reap groups without an expiry tag created longer ago (e.g. 1d).",
)
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    callback=non_empty,
    help="Resource group name pattern to leave alone (glob).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="Deletes in flight per subscription (ARM throttles each subscription on its own).",
)
@click.option("--yes", is_flag=True, help="Really delete. Without it, only print what would be deleted.")
@click.option("--notify", callback=notify_url, metavar="URL", help=NOTIFY_HELP)
@output_options
def reap(
    output: Output,
    subscriptions: tuple[str, ...],
    all_subscriptions: bool,
    older_than: str | None,
    excludes: tuple[str, ...],
    concurrency: int,
    yes: bool,
    notify: str | None,
) -> None:
    """Delete expired acagpu resource groups. Dry-run by default.

    Only groups tagged acagpu:managed=true are considered; acagpu:keep=true and --exclude
    patterns are always skipped. Throttled deletes (HTTP 429) wait for ARM's Retry-After and are
    sent again, never given up. On a terminal, without --yes, it lists what it would delete and
    asks. Exits 6 if any deletion could not be verified.
    """
    age = parse_ttl(older_than, "--older-than") if older_than else None
    scope = Scope(tuple(dict.fromkeys(s.lower() for s in subscriptions)), all_subscriptions)
    settings = command_settings(scope.subscriptions[0] if len(scope.subscriptions) == 1 else None)

    def sweep(delete: bool) -> reap_flow.ReapReport:
        return reap_flow.run(
            settings,
            scope,
            delete=delete,
            older_than=age,
            excludes=excludes,
            concurrency=concurrency,
            progress=output,
        )

    report = sweep(yes)
    doomed = report.by_status("would-delete")
    if not yes and doomed and sys.stdin.isatty():
        click.echo(reap_flow.render_text(report, subscriptions=scope.uses_graph), err=True)
        confirm(
            f"Delete these {len(doomed)} resource group(s)?",
            yes=False,
            refusal=f"not deleting {len(doomed)} expired group(s)",
        )
        report = sweep(True)
    doc = report.as_dict()
    if notify:
        send(output, doc, notify, reap_message(doc))
    output.summary(reap_flow.render_markdown(report))
    if output.github:
        for item in report.by_status("failed"):
            output.error(f"reap: could not delete {item.resource_group}: {item.error}")

    def human(stream: TextIO) -> None:
        print(reap_flow.render_text(report, subscriptions=scope.uses_graph), file=stream)

    output.emit(doc, human)
    reap_flow.raise_for_failures(report)
