"""P against the free GPU quota: how many shards can run at once, read before anything exists.

The run's preflight clamps `--parallel` to the GPUs free in the environment's own usages (where it
reports GPUs) or else the region's; `--dry-run` and the question before a run read the same figure
the same way, so the plan a user confirms (its P, its rounds, its wall time) is the one that runs.
A quota of 0 GPUs can never serve a shard: refused before anything is made (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from aca_gpu.errors import AcaGpuError, PreflightRefused
from aca_gpu.models import Cloud, EnvInfo, ResourceGroupInfo, UsageInfo
from aca_gpu.workflow.engine.plan import Plan
from aca_gpu.workflow.fanout.spec import FanoutSpec
from aca_gpu.workflow.preflight import quota

APP = "Microsoft.App"
QUOTA_HINT = (
    "request more GPUs for the environment on its Quota page in the Azure portal (Managed Environment "
    "Consumption T4/NCA100 GPUs), or for the region through Quotas → Azure Container Apps"
)


@dataclass(frozen=True)
class Clamp:
    """P as it will run, and why: `doc` is the document's `parallel.quota` (None: nothing matched
    or the quota was not read, and P stays as asked); `said` is the line the plan and preflight print."""

    parallel: int
    said: str
    doc: dict[str, Any] | None = None
    refusal: PreflightRefused | None = None


def usages(
    cloud: Cloud, plan: Plan, place: tuple[ResourceGroupInfo, EnvInfo] | None
) -> tuple[list[UsageInfo], str]:
    """The environment's own usages where they report the plan's GPU, else the region's."""
    if place is not None:
        group, env = place
        try:
            found = cloud.environment_usages(group.name, env.name)
            profile = plan.pairs[0].profile
            if any(quota.matches(u, profile) for u in found):
                return found, f"environment {env.name}"
        except AcaGpuError:
            pass
    return cloud.usages(plan.location), f"region {plan.location}"


def read_clamp(
    cloud: Cloud, plan: Plan, asked: int, place: tuple[ResourceGroupInfo, EnvInfo] | None
) -> Clamp:
    """Never raises for a quota it could not read (P stays as asked, and it says so)."""
    profile = plan.pairs[0].profile
    try:
        found, scope = usages(cloud, plan, place)
    except AcaGpuError as exc:
        return Clamp(asked, f"{asked} (quota not read: {exc.message})")
    usage = next((u for u in found if quota.matches(u, profile)), None)
    if usage is None:
        return Clamp(asked, f"{asked} (no GPU usage matched in {scope}: not clamped)")
    free = int(usage.limit - usage.current)
    doc: dict[str, Any] = {
        "asked": asked, "quota_limit": usage.limit, "quota_used": usage.current,
        "usage": usage.name, "scope": scope,
    }  # fmt: skip
    if usage.limit < 1:
        refusal = PreflightRefused(
            f"--parallel {asked}: the GPU quota of {scope} is {usage.limit:g} "
            f"{profile.type} GPUs (usage {usage.name}), so no shard can ever run",
            code="QuotaCannotServe",
            hint=QUOTA_HINT,
        )
        return Clamp(asked, refusal.message, doc, refusal)
    limit = max(1, min(asked, free))
    doc["parallel"] = limit
    if limit < asked:
        said = (
            f"{limit} at once, not {asked}: {scope} has {max(0, free)} of "
            f"{usage.limit:g} {profile.type} GPUs free ({usage.name}); {QUOTA_HINT}"
        )
    else:
        said = f"{limit} at once ({max(0, free)} of {usage.limit:g} GPUs free in {scope})"
    return Clamp(limit, said, doc)


def planned(cloud: Cloud, fanout: FanoutSpec) -> tuple[FanoutSpec, Clamp]:
    """The fan-out as `--dry-run` and the question before a run show it: P clamped as the run's
    preflight will clamp it (raises the refusal of a quota that can serve no shard). The run itself
    is given the unclamped spec: its preflight reads the quota again, as it is then."""
    from aca_gpu.workflow.env.find import find_env

    plan = fanout.run.plan
    place = find_env(cloud, plan.env) if plan.env is not None else None
    if place is None and not _registered(cloud):  # reading usages would register it: a write
        said = (
            f"{fanout.parallel} (quota not read: {APP} is not registered in this subscription; "
            "the run registers it and reads the quota then)"
        )
        return fanout, Clamp(fanout.parallel, said)
    clamp = read_clamp(cloud, plan, fanout.parallel, place)
    if clamp.refusal is not None:
        raise clamp.refusal
    return replace(fanout, parallel=clamp.parallel), clamp


def _registered(cloud: Cloud) -> bool:
    try:
        return cloud.provider_registered(APP)
    except AcaGpuError:
        return False
