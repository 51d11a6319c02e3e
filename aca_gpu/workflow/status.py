"""`acagpu status`: the runs that exist, read from tags and live state (age, expiry, phase, spend so far).

Spend is an estimate: tester executions count from their start/end times, the explorer from the
run's creation while it has a running replica (an upper bound, labelled as such). On a dedicated
profile the node bills while the environment exists, replicas or not, so a dedicated run counts node
time (its whole age) instead: a kept, stopped dedicated run is not "≈$0.00". The money comes from
`cost.run_spend`, the function `reap` prices a group with too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from aca_gpu import naming
from aca_gpu.cost import run_spend
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud, ExecutionInfo, FleetGroup
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Run, age_seconds, list_runs, run_from_group


def _execution_seconds(info: ExecutionInfo, now: datetime) -> float:
    start = naming.parse_iso_utc(info.start_time or "")
    if start is None:
        return 0.0
    end = naming.parse_iso_utc(info.end_time or "") or now
    return max(0.0, (end - start).total_seconds())


def describe_run(cloud: Cloud, run: Run, now: datetime) -> dict[str, Any]:
    tags, names, rg = run.tags, run.names, run.resource_group
    age = age_seconds(tags, now)
    expires = naming.parse_iso_utc(tags.get(naming.TAG_EXPIRES_AT, ""))
    phase, gpu_seconds = "empty", 0.0
    state = (run.group.provisioning_state or "").lower()
    if state == "deleting":
        phase = "deleting"
    else:
        try:
            app = cloud.get_app(rg, names.explorer)
            executions = cloud.list_executions(rg, names.tester) if cloud.get_job(rg, names.tester) else []
            if app is not None:
                if (app.running_status or "").lower() == "stopped" or not app.max_replicas:
                    phase = "stopped"  # a kept run between smi/exec uses: no replica bills
                else:
                    running = [
                        r for r in cloud.list_app_replicas(rg, names.explorer) if r.running_state == "Running"
                    ]
                    phase = "running" if running else "starting"
                    gpu_seconds += (age or 0.0) if running else 0.0
            if any(not e.finished for e in executions):
                phase = "testing"
            gpu_seconds += sum(_execution_seconds(e, now) for e in executions)
        except AcaGpuError as exc:
            phase = f"unknown ({exc.code or 'error'})"
    profile = _profile((tags.get(naming.TAG_GPU) or "").split(",")[0])
    node = profile is not None and not profile.serverless
    billed = (age or 0.0) if node else gpu_seconds
    spend = None if profile is None else run_spend(profile, billed, run.group.location)
    what = (
        "node time since creation (a dedicated node bills replicas or not)" if node else "replica lifetimes"
    )
    cost = {
        "gpu_seconds": round(gpu_seconds, 1),
        "node_seconds": round(billed, 1) if node else None,
        "usd_estimate": None if spend is None else round(spend.usd, 4),
        "basis": "unknown GPU" if spend is None else f"{what} so far; {spend.basis}",
    }
    return {
        "run_id": run.run_id,
        "resource_group": rg,
        "location": run.group.location,
        "gpu": tags.get(naming.TAG_GPU),
        "owner": tags.get(naming.TAG_OWNER),
        "keep": tags.get(naming.TAG_KEEP) == "true",
        "created_at": tags.get(naming.TAG_CREATED_AT),
        "expires_at": tags.get(naming.TAG_EXPIRES_AT),
        "age_seconds": None if age is None else round(age),
        "expires_in_seconds": None if expires is None else round((expires - now).total_seconds()),
        "phase": phase,
        "cost": cost,
    }


def _profile(alias: str | None) -> checks.Profile | None:
    if not alias:
        return None
    try:
        return checks.resolve_profile(alias)
    except AcaGpuError:
        return None


def status(cloud: Cloud, *, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    runs = sorted(list_runs(cloud), key=lambda r: r.tags.get(naming.TAG_CREATED_AT, ""))
    from aca_gpu.workflow.envs import list_envs

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
    from aca_gpu.workflow.envs import view

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
