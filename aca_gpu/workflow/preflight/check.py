"""`acagpu check`: can this credential run these GPUs in these regions, before anything is created?

Credentials and who they are (token claims, never the token), the subscription, Microsoft.App's
registration, then per region and GPU profile: offered now, GPU quota used/limit (the usage that was
read, as the preflight reads it), an hourly list-price estimate and the last driver seen there.
The verdict is the preflight's own rule: exit 0 when every requested GPU can run in at least one
requested region, 3 when quota refuses where the profile is offered, 2 when no region offers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aca_gpu.cost import catalog_prices, load_prices
from aca_gpu.errors import AcaGpuError, BadInput, PreflightRefused, QuotaError
from aca_gpu.models import Cloud, UsageInfo
from aca_gpu.naming import validate_location
from aca_gpu.units import duration_text
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.preflight import drivers, quota, unavailable

PROVIDER = "Microsoft.App"


@dataclass(frozen=True)
class CheckRequest:
    locations: tuple[str, ...]
    gpus: tuple[str, ...]


@dataclass
class CheckResult:
    doc: dict[str, Any]
    error: AcaGpuError | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)


def _inputs(request: CheckRequest) -> tuple[list[str], list[tuple[str, checks.Profile]]]:
    """Every region and GPU checked before any call: bad input asks nothing of Azure (exit 2)."""
    if not request.locations or not request.gpus:
        raise BadInput("give at least one -l LOCATION and one --gpu")
    regions = list(dict.fromkeys(validate_location(r) for r in request.locations))
    gpus = list(dict.fromkeys(g.strip().lower() for g in request.gpus))
    if not all(gpus):
        raise BadInput("--gpu is empty: give an alias such as t4 or a100")
    return regions, [(g, checks.resolve_profile(g)) for g in gpus]


def check(cloud: Cloud, request: CheckRequest) -> CheckResult:
    regions, profiles = _inputs(request)
    who = cloud.identity()
    sub = cloud.subscription()
    registered = cloud.provider_registered(PROVIDER)
    doc: dict[str, Any] = {
        "command": "check",
        "identity": who.as_dict(),
        "subscription": sub.as_dict(),
        "provider": {"namespace": PROVIDER, "registered": registered},
        "rows": [],
    }
    doc["status"] = "refused"  # (until every row is read: the document always carries a status)
    if (sub.state or "Enabled") not in ("Enabled", "Warned", "PastDue"):
        return CheckResult(
            doc, PreflightRefused(f"subscription {sub.id} is {sub.state}", code="Subscription")
        )
    if not registered:
        error = PreflightRefused(
            f"{PROVIDER} is not registered for subscription {sub.id}: regions cannot be read",
            code="MissingSubscriptionRegistration",
            hint=f"`acagpu up` registers it, or: az provider register --namespace {PROVIDER}",
        )
        return CheckResult(doc, error)
    table = load_prices()
    doc["prices"] = table.label
    rows = [
        row
        for region in regions
        for row in _region_rows(cloud, region, profiles, catalog_prices(table, region))
    ]
    doc["rows"] = rows
    # what runs here found without capacity in the last 30 min (any region: a sweep's candidates)
    doc["unavailable"] = [s.as_dict() for s in unavailable.known()]
    verdict = _verdict(rows, [g for g, _ in profiles])
    doc["status"] = "ok" if verdict is None else "refused"
    return CheckResult(doc, verdict, rows)


def _region_rows(
    cloud: Cloud, region: str, profiles: list[tuple[str, checks.Profile]], prices: dict[str, float]
) -> list[dict[str, Any]]:
    offered = {o.name.lower() for o in cloud.available_profiles(region)}
    usages: list[UsageInfo] = []
    read_error: str | None = None
    try:
        usages = cloud.usages(region)
    except AcaGpuError as exc:
        read_error = exc.message
    rows = []
    for gpu, profile in profiles:
        found = quota.check(region, usages, profile, quota.needs([profile])[profile.type][1], read_error)
        driver, source = drivers.known_driver(profile.type, region)
        is_offered = profile.type.lower() in offered
        can_run = is_offered and found.ok is not False
        reason = None
        if not is_offered:
            reason = f"{region} does not offer {profile.type}"
        elif found.ok is False:
            reason = found.error().message
        elif found.ok is None:
            reason = f"quota not checked: {found.note}"
        rows.append(
            {
                "region": region,
                "gpu": gpu,
                "profile": profile.type,
                "offered": is_offered,
                "quota": found.as_dict(),
                "price_per_hour_usd": prices.get(profile.type),
                "driver": {"version": driver, "source": source},
                "can_run": can_run,
                "reason": reason,
            }
        )
    return rows


def _verdict(rows: list[dict[str, Any]], gpus: list[str]) -> AcaGpuError | None:
    """Every GPU needs one region that runs it; quota refusals are exit 3, no offer anywhere exit 2."""
    for gpu in gpus:
        mine = [r for r in rows if r["gpu"] == gpu]
        if any(r["can_run"] for r in mine):
            continue
        where = ", ".join(r["region"] for r in mine)
        if any(r["offered"] for r in mine):
            reasons = "; ".join(r["reason"] for r in mine if r["offered"])
            return QuotaError(
                f"--gpu {gpu}: {reasons}", code="InsufficientGpuQuota", hint=quota.CHECK_QUOTA_HINT
            )
        return PreflightRefused(
            f"--gpu {gpu}: no region of {where} offers {mine[0]['profile']}",
            code="ProfileNotOffered",
            hint="`acagpu profiles --offline` lists the regions the docs name",
        )
    return None


def render(doc: dict[str, Any]) -> str:
    who, sub, prov = doc["identity"], doc["subscription"], doc["provider"]
    name = who.get("upn") or (f"app {who['app_id']}" if who.get("app_id") else who.get("kind"))
    lines = [
        f"identity      {name} (tenant {who.get('tenant_id') or '?'}, object {who.get('object_id') or '?'})",
        f"subscription  {sub.get('display_name') or '?'} {sub['id']} ({sub.get('state') or '?'})",
        f"provider      {prov['namespace']} {'registered' if prov['registered'] else 'NOT registered'}",
    ]
    rows = doc.get("rows") or []
    if rows:
        header = (
            f"{'REGION':<16} {'GPU':<10} {'OFFERED':<8} {'QUOTA':<12} {'$/h≈':>6}  {'LAST DRIVER':<12} RUN"
        )
        lines += ["", header]
        for r in rows:
            q = r["quota"]
            used = f"{q['used']:g}/{q['limit']:g}" if q["usage"] else "unknown"
            price = r["price_per_hour_usd"]
            lines.append(
                f"{r['region']:<16} {r['gpu']:<10} {'yes' if r['offered'] else 'no':<8} {used:<12} "
                f"{f'{price:.2f}' if price is not None else '?':>6}  {r['driver']['version']:<12} "
                f"{'yes' if r['can_run'] else 'no'}"
            )
        usages = sorted({r["quota"]["usage"] for r in rows if r["quota"]["usage"]})
        lines += [
            "",
            f"quota read from usages: {', '.join(usages) or 'none matched'} (usage names UNCONFIRMED); "
            f"$/h≈ is a list-price estimate ({doc.get('prices', 'bundled table')})",
        ]
        for r in rows:
            if r["reason"] and not r["can_run"]:
                lines.append(f"  {r['region']} {r['gpu']}: {r['reason']}")
    seen = doc.get("unavailable") or []
    if seen:
        lines += ["", "seen without capacity by recent runs (runs try these places last):"]
        for s in seen:
            lines.append(
                f"  {s['location']} {s['profile']}: {s['reason']} {duration_text(s['age_s'])} ago, "
                f"forgotten in {duration_text(s['forgotten_in_s'])} ({s['detail'][:120]})"
            )
    return "\n".join(lines)
