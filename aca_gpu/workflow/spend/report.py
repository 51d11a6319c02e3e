"""`acagpu cost`: each run's estimate beside what Azure Cost Management billed for it.

The estimate is what the run printed at its end (the local ledger); the bill is Cost Management's
ActualCost for the run's resource groups, grouped by the `acagpu:run-id` tag. Both are summed per
run. A run may be:
- `billed`: both known; `difference_usd` is billed minus estimate;
- `billed-over-estimate`: billed more than the tolerance above the estimate (TOLERANCE_PCT of the
  estimate AND TOLERANCE_USD, both: a warm run's cents differ by fractions of a cent that say
  nothing): time Azure billed that acagpu never saw running (e.g. a replica that stalled between its
  image pull and its container start, as users reported on A100 jobs), or prices that changed;
- `too-recent`: no bill yet and the run ended inside Cost Management's data delay (up to a day);
- `not-billed`: no bill though the delay has passed;
- `no-estimate`: billed, but this machine has no record of the run (made elsewhere, e.g. CI).

A run made with `--max-cost` has its cap beside the bill (`max_cost_usd`, from its ledger lines; a
served app's from its group's `acagpu:max-cost` tag as it was torn down) and `over_cap` when the bill
is known; a bill above the cap says by what rule it may be.

Only this cloud's runs are set beside its bill: a ledger line names its ARM endpoint (`arm`), and an
emulator (a new endpoint at every start, one subscription id for all) never lists another's runs.

The subscriptions come as a list, so a caller that found them by other means (every subscription the
credential sees) hands them in unchanged; one query per subscription.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from aca_gpu.config import Settings
from aca_gpu.workflow.spend import ledger

# Billed above the estimate by more than both is flagged (docs/costs.md says why these figures)
TOLERANCE_PCT = 10.0  # the client sees a container at its next look; prices may change meanwhile
TOLERANCE_USD = 0.01  # a cent: differences below it are the rounding of seconds, not a finding
OVER_NOTE = (
    "billed more than estimated, past the tolerance: Azure billed time acagpu did not see running "
    "(e.g. a replica that stalled between its image pull and its container start), or prices changed"
)
CAP_NOTE = (
    "billed above its --max-cost ${cap:g}: the cap's overshoot is bounded by the replicas running x "
    "their price x one look, plus the time ARM took to accept the stops (the run's `cost_cap`)"
)
DELAY_NOTE = (
    "Cost Management's data arrive 8 to 24 hours after the usage: runs newer than a day may show "
    "part of their bill, or none yet"
)


def cost_report(
    settings: Settings,
    subscriptions: Sequence[str | None],
    *,
    since: timedelta,
    run_ids: Sequence[str] = (),
    now: datetime | None = None,
    min_usd: float = TOLERANCE_USD,
) -> dict[str, Any]:
    """One document: a row per run (estimate, billed, difference, status), totals, and the delay.
    `min_usd` is the tolerance's floor (`cost --min-difference`; an emulator's compressed time makes
    a stall worth less than a cent)."""
    from aca_gpu.azure.clients import make_clients
    from aca_gpu.azure.costmanagement import DATA_DELAY_HOURS, billed_costs

    end = now or datetime.now(UTC)
    start = end - since
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    warnings: list[str] = []
    queried: list[str] = []
    for wanted in subscriptions or [None]:
        clients = make_clients(settings, wanted)
        queried.append(clients.subscription_id)
        rows, more = billed_costs(clients, start, end, run_ids)
        if more:
            warnings.append(
                f"{clients.subscription_id}: the bill has more rows than one page; totals are partial"
            )
        for row in rows:
            run = _run(runs, row.subscription, row.run_id or f"(untagged) {row.resource_group}")
            run["billed_usd"] = (run["billed_usd"] or 0.0) + row.usd
            run["resource_groups"].add(row.resource_group.lower())
    here = ledger.arm_of(settings.arm_endpoint)
    for line in ledger.read():
        if line.get("subscription") not in queried or (run_ids and line["run_id"] not in run_ids):
            continue
        if ledger.arm_of(line.get("arm")) != here:  # another cloud's run (another emulator)
            continue
        ended = _parse(line.get("ended_at"))
        if ended is None or ended < start:
            continue
        run = _run(runs, str(line["subscription"]), str(line["run_id"]))
        run["estimate_usd"] = (run["estimate_usd"] or 0.0) + float(line.get("usd_estimate") or 0.0)
        run["resource_groups"].add(str(line.get("resource_group", "")).lower())
        run["ended_at"] = max(run["ended_at"] or "", str(line.get("ended_at")))
        run["prices"] = line.get("prices")
        run["profile"] = line.get("profile")
        if isinstance(line.get("max_cost_usd"), (int, float)):  # --max-cost, beside the bill
            run["max_cost_usd"] = float(line["max_cost_usd"])
    delay = timedelta(hours=DATA_DELAY_HOURS)
    out = [_judge(run, end, delay, min_usd) for run in runs.values()]
    out.sort(key=lambda r: (r["ended_at"] or "", r["run_id"]))
    flagged = [r["run_id"] for r in out if r["status"] == "billed-over-estimate"]
    return {
        "command": "cost",
        "since": start.isoformat(timespec="seconds"),
        "until": end.isoformat(timespec="seconds"),
        "subscriptions": queried,
        "data_delay_hours": DATA_DELAY_HOURS,
        "data_delay": DELAY_NOTE,
        "runs": out,
        "totals": {
            "estimate_usd": round(sum(r["estimate_usd"] or 0.0 for r in out), 6),
            "billed_usd": round(sum(r["billed_usd"] or 0.0 for r in out), 6),
        },
        "flagged": flagged,
        "tolerance": {
            "pct": TOLERANCE_PCT,
            "usd": min_usd,
            "rule": "flagged when billed exceeds the estimate by more than both",
        },
        "warnings": warnings,
    }


def _run(runs: dict[tuple[str, str], dict[str, Any]], subscription: str, run_id: str) -> dict[str, Any]:
    return runs.setdefault(
        (subscription, run_id),
        {
            "run_id": run_id,
            "subscription": subscription,
            "resource_groups": set(),
            "estimate_usd": None,
            "billed_usd": None,
            "ended_at": None,
            "prices": None,
            "profile": None,
            "max_cost_usd": None,
        },
    )


def _parse(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def past_tolerance(estimate: float, billed: float, min_usd: float = TOLERANCE_USD) -> bool:
    """Billed above the estimate by more than TOLERANCE_PCT of it and more than `min_usd`."""
    over = billed - estimate
    return over > min_usd and over > estimate * TOLERANCE_PCT / 100


def _judge(run: dict[str, Any], now: datetime, delay: timedelta, min_usd: float) -> dict[str, Any]:
    est, billed = run["estimate_usd"], run["billed_usd"]
    ended = _parse(run["ended_at"])
    recent = ended is not None and now - ended < delay
    diff = None if est is None or billed is None else billed - est
    if billed is None:
        status = "too-recent" if recent else "not-billed"
        note = "no bill yet: " + DELAY_NOTE if recent else "Cost Management shows no charge for this run"
    elif est is None:
        status, note = "no-estimate", "billed; this machine has no record of the run's estimate"
    elif past_tolerance(est, billed, min_usd):
        status, note = "billed-over-estimate", OVER_NOTE
    else:
        status = "billed"
        note = "may still grow: " + DELAY_NOTE if recent else ""
    cap = run.get("max_cost_usd")
    if cap is not None and billed is not None and billed > cap:
        note = (note + "; " if note else "") + CAP_NOTE.format(cap=cap)
    return {
        **run,
        "over_cap": None if cap is None or billed is None else billed > cap,
        "resource_groups": sorted(g for g in run["resource_groups"] if g),
        "estimate_usd": None if est is None else round(est, 6),
        "billed_usd": None if billed is None else round(billed, 6),
        "difference_usd": None if diff is None else round(diff, 6),
        "difference_pct": None if diff is None or not est else round(100 * diff / est, 1),
        "status": status,
        "note": note,
    }
