"""`acagpu status`: the runs that exist, read from tags and live state (age, expiry, phase, spend so far).

Phase and spend come from `spend.run_spend`, the function `reap` prices a group with too, so the
same group never shows two figures; the figure names the price table it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from aca_gpu import naming
from aca_gpu.models import Cloud, FleetGroup
from aca_gpu.workflow.base.context import Run, age_seconds, list_runs, run_from_group
from aca_gpu.workflow.serve.view import served_view
from aca_gpu.workflow.spend import run_spend
from aca_gpu.workflow.spend.phase import AT_ZERO, SERVING


def describe_run(cloud: Cloud, run: Run, now: datetime) -> dict[str, Any]:
    tags, rg = run.tags, run.resource_group
    age = age_seconds(tags, now)
    expires = naming.parse_iso_utc(tags.get(naming.TAG_EXPIRES_AT, ""))
    spend = run_spend(cloud, run, now)
    protected = tags.get(naming.TAG_KEEP) == "true"
    served = served_view(cloud, rg, dict(tags), spend)  # its URL and replicas (serve/view.py)
    phase = _served_phase(spend.phase, served)
    return {
        "run_id": run.run_id,
        "resource_group": rg,
        "location": run.group.location,
        "gpu": tags.get(naming.TAG_GPU),
        "owner": tags.get(naming.TAG_OWNER),
        # `up --keep` leaves its explorer app, the one app of a run that is not served (a served
        # app is `served`); `acagpu:keep=true` protects a group from reapers
        "keep": protected or (spend.executions.apps > 0 and not tags.get(naming.TAG_SERVED)),
        "protected": protected,
        "created_at": tags.get(naming.TAG_CREATED_AT),
        "expires_at": tags.get(naming.TAG_EXPIRES_AT),
        "age_seconds": None if age is None else round(age),
        "expires_in_seconds": None if expires is None else round((expires - now).total_seconds()),
        "phase": phase,  # every phase is in docs/status.md
        "phase_detail": spend.phase_detail,
        "executions": spend.executions.as_dict(),
        "shards": spend.executions.shards,  # a fan-out's shards: total, queued, starting, ...
        "cost": spend.as_dict(),
        "served": served,
    }


def _served_phase(phase: str, served: dict[str, Any] | None) -> str:
    """A served app's phase agrees with the replica count `status` shows beside it: both come from
    the later of two reads, since an app can scale to zero (or wake) between them."""
    count = served.get("replicas") if served else None
    if count is None or phase not in (SERVING, AT_ZERO, "starting"):
        return phase
    if count == 0:
        return AT_ZERO
    return "starting" if phase == AT_ZERO else phase


def status(cloud: Cloud, *, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    runs = sorted(list_runs(cloud), key=lambda r: r.tags.get(naming.TAG_CREATED_AT, ""))
    from aca_gpu.workflow.env.lifecycle import list_envs

    return {
        "command": "status",
        "runs": [describe_run(cloud, run, now) for run in runs],
        # warm environments (runs inside, expiry, idle cost); nested, so `-o tsv` still lists the runs
        "environments": {"warm": list_envs(cloud)},
    }


def fleet_status(
    groups: Sequence[FleetGroup], clouds: Callable[[str], Cloud], *, now: datetime | None = None
) -> dict[str, Any]:
    """The runs (and warm environments) in many subscriptions, found by one Resource Graph query
    (`groups`); each one's phase and spend are then read from its own subscription."""
    from aca_gpu.workflow.env.lifecycle import view

    now = now or datetime.now(UTC)
    found = [
        (g.subscription, run_from_group(g.group), g.environments)
        for g in groups
        if g.group.tags.get(naming.TAG_ROLE) != "guard" and not naming.is_env_group(dict(g.group.tags))
    ]
    found.sort(key=lambda f: f[1].tags.get(naming.TAG_CREATED_AT, ""))
    runs = []
    for sub, run, envs in found:
        runs.append(
            {"subscription": sub, **describe_run(clouds(sub), run, now), "managed_environments": list(envs)}
        )
    warm = [
        {"subscription": g.subscription, **view(clouds(g.subscription), g.group, now=now)}
        for g in groups
        if naming.is_env_group(dict(g.group.tags))
    ]
    return {
        "command": "status",
        "subscriptions": sorted({g.subscription for g in groups}),
        "runs": runs,
        "environments": {"warm": warm},
    }
