"""`acagpu cost`: what each run was estimated to cost beside what Azure actually billed."""

from __future__ import annotations

from typing import Any, TextIO

import click

from aca_gpu.cli.options import duration, guid, output_options
from aca_gpu.cli.render import per_subscription, table
from aca_gpu.cli.runopts import command_settings
from aca_gpu.naming import parse_duration, validate_run_id
from aca_gpu.output import Output
from aca_gpu.units import usd_text


def _usd(value: float | None) -> str:
    """The one money text (units.usd_text): a bill of milliseconds reads `<$0.0001`, never `$0.0000`."""
    return "-" if value is None else usd_text(value)


def _difference(value: float | None) -> str:
    """Signed, in the same text: `+0.0004`, `-0.02`, `+<0.0001`."""
    if value is None:
        return "-"
    return ("-" if value < 0 else "+") + usd_text(abs(value)).replace("$", "")


def render_cost(doc: dict[str, Any], stream: TextIO) -> None:
    runs = doc["runs"]
    if not runs:
        print(f"no acagpu run billed or recorded since {doc['since']}", file=stream)
    else:
        several = len(doc.get("subscriptions") or ()) > 1  # as `status`: a section a subscription
        for subscription, group in per_subscription(runs) if several else [("", runs)]:
            if subscription:
                print(f"subscription {subscription}", file=stream)
            print(_cost_table(group, stream), file=stream)
        for note, named in _notes(runs):  # one sentence once, with the runs it is about
            print(f"{_named(named, len(runs))}: {note}", file=stream)
        tables = _tables(runs)
        if tables:
            print(f"estimate: acagpu's list-price estimate at each run's end ({tables})", file=stream)
    print(f"billed: Azure Cost Management (ActualCost). {doc['data_delay']}.", file=stream)
    limit = doc.get("tolerance") or {}
    if limit:
        print(
            f"flagged: billed over the estimate by more than {limit['pct']:g} % and ${limit['usd']:g}",
            file=stream,
        )


def _cost_table(runs: list[dict[str, Any]], stream: TextIO) -> str:
    capped = any(r.get("max_cost_usd") is not None for r in runs)  # a CAP column beside the bill
    rows = [
        [
            r["run_id"],
            (r["ended_at"] or "?")[:16],
            _usd(r["estimate_usd"]),
            _usd(r["billed_usd"]),
            *([_usd(r.get("max_cost_usd"))] if capped else []),
            _difference(r["difference_usd"]),
            r["status"],
        ]
        for r in runs
    ]
    headers = ["RUN", "ENDED", "ESTIMATE", "BILLED", *(["CAP"] if capped else []), "DIFF", "STATUS"]
    return table(headers, rows, stream=stream, right=("ESTIMATE", "BILLED", "CAP", "DIFF"))


def _notes(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    found: dict[str, list[str]] = {}
    for r in runs:
        if r["note"]:
            found.setdefault(r["note"], []).append(r["run_id"])
    return list(found.items())


NAMED_MAX = 4  # run ids a footnote spells out before it counts the rest


def _named(run_ids: list[str], shown: int) -> str:
    """Which runs a footnote is about, in a few words: `every run above (49)` or `a, b, c and 46
    more` (a footnote once listed 49 run ids on one line); `-o json` has each run's own note."""
    if len(run_ids) > 1 and len(run_ids) == shown:
        return f"every run above ({shown})"
    if len(run_ids) <= NAMED_MAX:
        return ", ".join(run_ids)
    return f"{', '.join(run_ids[: NAMED_MAX - 1])} and {len(run_ids) - NAMED_MAX + 1} more"


def _tables(runs: list[dict[str, Any]]) -> str:
    """The price tables the shown estimates came from, as each run recorded it; empty if none shown."""
    estimated = [r for r in runs if r.get("estimate_usd") is not None]
    named = sorted({str(r["prices"]) for r in estimated if r.get("prices")})
    if any(not r.get("prices") for r in estimated):
        named.append("table not recorded for some runs")
    return "; ".join(named)


@click.command()
@click.option("--since", default="30d", show_default=True, callback=duration, help="How far back, e.g. 7d.")
@click.option("--run-id", "run_ids", multiple=True, help="Only this run; repeat for several.")
@click.option(
    "--subscription",
    "subscriptions",
    multiple=True,
    callback=guid,
    help="Subscription to ask; repeat for several (default: the configured one).",
)
@click.option(
    "--all-subscriptions",
    is_flag=True,
    help="Ask every subscription the credential can see (found with one Azure Resource Graph query).",
)
@click.option(
    "--min-difference",
    "min_usd",
    type=click.FloatRange(min=0),
    default=0.01,
    show_default=True,
    help="Flag a run only when billed exceeds its estimate by more than this many USD (and 10 %).",
)
@output_options
def cost(
    output: Output,
    since: str,
    run_ids: tuple[str, ...],
    subscriptions: tuple[str, ...],
    all_subscriptions: bool,
    min_usd: float,
) -> None:
    """Show each run's estimate beside what Azure Cost Management billed, and flag the differences."""
    from aca_gpu.workflow.fleet.groups import Scope, subscription_ids
    from aca_gpu.workflow.spend.report import cost_report

    wanted = tuple(validate_run_id(r) for r in run_ids)
    settings = command_settings()
    scope = Scope(tuple(dict.fromkeys(s.lower() for s in subscriptions)), all_subscriptions)
    doc = cost_report(
        settings,
        subscription_ids(settings, scope),
        since=parse_duration(since),
        run_ids=wanted,
        min_usd=min_usd,
    )
    for warning in doc["warnings"]:
        output.warn(warning)
    output.emit(doc, lambda stream: render_cost(doc, stream))
