"""Warm environments (`acagpu env`): a tagged group holding one serverless-only GPU environment.

Building an environment is most of a cold run's wait (minutes on Azure, a GPU profile alone ~490 s by a
third-party measurement), yet one whose profiles are all serverless bills nothing while no replica runs.
So it may stay: runs borrow it (`up --env`), create only their own jobs inside it and delete only those.
Its group carries `acagpu:kind=env` and an expiry one idle TTL after its last use, renewed by every run;
`reap` and the guard remove an expired one only when no run is inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from aca_gpu import cost, naming
from aca_gpu.config import Settings
from aca_gpu.errors import AcaGpuError, BadInput, NotFound, PreflightRefused
from aca_gpu.models import Cloud, EnvSpec, ResourceGroupInfo
from aca_gpu.output import Progress
from aca_gpu.units import usd_text
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.threads import spawn, wait_for
from aca_gpu.workflow.env.find import find_env, run_groups, running_replicas, runs_inside

DEFAULT_IDLE_TTL = "7d"
DEFAULT_GPUS = ("t4",)
PROVIDER = "Microsoft.App"
REGISTER_TIMEOUT_S = 600.0
DEDICATED_EXAMPLE = "nc24-a100"  # what `env list` says a dedicated profile would add


@dataclass(frozen=True)
class EnvPlan:
    """`env create`, validated before any cloud call (bad input creates nothing)."""

    name: str
    names: naming.EnvNames
    location: str
    gpus: tuple[tuple[str, checks.Profile], ...]  # (alias, profile), serverless only
    idle_ttl: timedelta
    owner: str
    wait_for_capacity_s: float | None = None  # --wait-for-capacity: then wait until each GPU has room

    def profiles(self) -> list[tuple[str, str]]:
        """(workload profile name, type): named after the alias, the way runs look them up."""
        return [(profile_name(alias), profile.type) for alias, profile in self.gpus]

    def tags(self) -> dict[str, str]:
        return naming.env_tags(
            self.name, owner=self.owner, idle_ttl=self.idle_ttl, gpus=",".join(a for a, _ in self.gpus)
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "resource_group": self.names.resource_group,
            "environment": self.names.environment,
            "location": self.location,
            "profiles": [{"name": n, "type": t} for n, t in self.profiles()],
            "idle_ttl_seconds": int(self.idle_ttl.total_seconds()),
            "idle_cost_usd_per_hour": 0.0,
        }


def profile_name(alias: str) -> str:
    return naming.validate_workload_profile_name("gpu-" + "".join(c for c in alias if c.isalnum())[:11])


def make_env_plan(
    settings: Settings,
    name: str,
    *,
    location: str | None,
    gpus: str | None,
    idle_ttl: str | None,
    owner: str,
    wait_for_capacity: str | None = None,
) -> EnvPlan:
    naming.validate_env_name(name)
    where = naming.validate_location(location or settings.location)
    aliases = [g.strip().lower() for g in (gpus.split(",") if gpus else DEFAULT_GPUS)]
    if not all(aliases):
        raise BadInput(f"--gpu {gpus!r}: an empty alias; separate GPUs by commas, e.g. t4,a100")
    chosen: list[tuple[str, checks.Profile]] = []
    for alias in dict.fromkeys(aliases):
        profile = checks.resolve_profile(alias)
        if not profile.serverless:
            raise BadInput(
                f"--gpu {alias} is a dedicated profile ({profile.type}): its node bills while the "
                "environment exists, so a warm environment takes serverless GPUs only (t4, a100)"
            )
        chosen.append((alias, profile))
    try:
        ttl = naming.parse_ttl(idle_ttl or DEFAULT_IDLE_TTL, "idle TTL")
    except BadInput as exc:
        raise BadInput(f"--idle-ttl: {exc.message}") from exc
    from aca_gpu.workflow.engine.waiting import bound_of

    return EnvPlan(name, naming.EnvNames(name), where, tuple(chosen), ttl, owner, bound_of(wait_for_capacity))


# ---- reading ---------------------------------------------------------------------------------


def _idle_cost(profiles: list[tuple[str, str]], staged: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the environment costs while no replica runs: dedicated nodes by the hour, and the
    registry `image stage` made by the day for its tier, used or not (docs/environments.md)."""
    dedicated = [t for _, t in profiles if not _serverless(t)]
    example = checks.resolve_profile(DEDICATED_EXAMPLE)
    hourly = sum(cost.price_per_hour(t) for t in dedicated)
    basis = (
        f"dedicated profile(s) {', '.join(dedicated)} bill a node while the environment exists"
        if dedicated
        else "serverless-only: its GPU profiles bill only while a replica runs "
        f"(a dedicated {example.type} profile would add ≈${cost.price_per_hour(example):.2f}/h)"
    )
    registry: dict[str, Any] | None = None
    name, sku = (staged or {}).get("registry"), str((staged or {}).get("sku") or "")
    if sku:
        try:
            rate = cost.registry_daily(sku)
        except BadInput:
            basis += f"; registry {name} ({sku}) bills a daily fee the price table does not hold"
        else:
            hourly += rate.usd_per_hour
            registry = {"name": name, **rate.as_dict()}
            basis += (
                f"; registry {name} ({sku}) bills ${rate.usd_per_day:.2f}/day whether used or not "
                f"({rate.meter}, {rate.included_gib} GiB stored included)"
            )
    return {
        "usd_per_hour": round(hourly, 4),
        "usd_per_day": round(hourly * 24, 2),
        "registry": registry,
        "basis": basis,
    }


def idle_text(idle: dict[str, Any] | None) -> str:
    """`$0.00/h idle`, or per day where a daily fee (a registry) makes the hourly figure round to
    nothing useful: `$0.67/day idle`."""
    if not idle or idle.get("usd_per_hour") is None:
        return "idle cost unknown"
    if idle.get("registry") and idle.get("usd_per_day") is not None:
        return f"{usd_text(idle['usd_per_day'])}/day idle"
    return f"{usd_text(idle['usd_per_hour'])}/h idle"


def _serverless(profile_type: str) -> bool:
    """Consumption and Consumption-GPU profiles bill per replica; anything else bills per node."""
    try:
        return checks.resolve_profile(profile_type).serverless
    except BadInput:
        return profile_type.lower().startswith("consumption")


def view(cloud: Cloud, group: ResourceGroupInfo, *, now: datetime | None = None) -> dict[str, Any]:
    """What `env list/show` print for one environment (read errors become a field, never a crash)."""
    tags = dict(group.tags)
    name = tags.get(naming.TAG_ENV) or group.name.removeprefix("rg-acagpu-env-")
    names = naming.EnvNames(name)
    doc: dict[str, Any] = {
        "name": name,
        "resource_group": group.name,
        "environment": names.environment,
        "location": group.location,
        "owner": tags.get(naming.TAG_OWNER),
        "created_at": tags.get(naming.TAG_CREATED_AT),
        "last_used": tags.get(naming.TAG_LAST_USED),
        "expires_at": tags.get(naming.TAG_EXPIRES_AT),
        "idle_ttl_seconds": int(tags.get(naming.TAG_IDLE_TTL) or 0) or None,
        "profiles": [],
        "runs": [],
        "replicas_running": None,
        "state": "unknown",
        "error": None,
    }
    expires = naming.parse_iso_utc(tags.get(naming.TAG_EXPIRES_AT, ""))
    doc["expired"] = bool(expires and expires <= (now or datetime.now(UTC)))
    try:
        env = cloud.get_environment(group.name, names.environment)
        profiles = list(env.workload_profiles) if env else []
        doc["profiles"] = [{"name": n, "type": t} for n, t in profiles]
        runs = runs_inside(cloud, group.name, name)
        doc["runs"] = [{"run_id": r, "pieces": sorted(p)} for r, p in sorted(runs.items())]
        doc["replicas_running"] = running_replicas(cloud, group.name, name)
        from aca_gpu.workflow.env.staging.stage import listing  # staging reads environments too

        doc["staged"] = listing(cloud, group.name, name)  # the environment's own registry, if any
        doc["idle_cost"] = _idle_cost(profiles, doc["staged"])
        if env is None:
            doc["state"] = "incomplete"
        elif (env.provisioning_state or "") != "Succeeded":
            doc["state"] = (env.provisioning_state or "unknown").lower()
        else:
            doc["state"] = "busy" if runs or doc["replicas_running"] else "idle"
    except AcaGpuError as exc:
        doc["error"] = exc.message
    return doc


def list_envs(cloud: Cloud) -> list[dict[str, Any]]:
    groups = cloud.list_resource_groups(naming.TAG_KIND, naming.KIND_ENV)
    mine = [g for g in groups if naming.is_env_group(dict(g.tags))]
    futures = [spawn(partial(view, cloud, g), "acagpu-env-view") for g in mine]
    return sorted((wait_for(f) for f in futures), key=lambda d: str(d["name"]))


def show_env(cloud: Cloud, name: str) -> dict[str, Any]:
    group, _ = find_env(cloud, name, to_use=False)
    return view(cloud, group)


# ---- creating and deleting ---------------------------------------------------------------------


def create_env(cloud: Cloud, plan: EnvPlan, progress: Progress) -> dict[str, Any]:
    """Make (or finish) the environment; running it again on a complete one changes nothing."""
    from aca_gpu.workflow.engine.aca_runtime import require_offered  # `env list` need not load the engine

    rg = plan.names.resource_group
    with progress.step(f"provider {PROVIDER}") as step:
        if cloud.provider_registered(PROVIDER):
            step.update("registered")
        else:
            cloud.register_provider(PROVIDER, timeout=REGISTER_TIMEOUT_S)
            step.update("registered now")
    offers = [o.name for o in cloud.available_profiles(plan.location)]
    require_offered(plan.location, offers, [t for _, t in plan.profiles()])
    with progress.step("resource group") as step:
        group = cloud.get_resource_group(rg)
        if group is not None and not naming.is_env_group(dict(group.tags)):
            raise PreflightRefused(f"resource group {rg} exists and is not an acagpu environment")
        if group is not None and group.location != plan.location:
            raise BadInput(f"environment {plan.name} exists in {group.location}, not {plan.location}")
        tags = naming.renewed_env_tags(dict(group.tags)) if group is not None else plan.tags()
        cloud.create_resource_group(rg, plan.location, tags)
        step.update(f"{rg}" + (" (exists)" if group is not None else ""))
    with progress.step("environment (serverless profiles only)") as step:
        env = cloud.get_environment(rg, plan.names.environment)
        wanted = plan.profiles()
        have = {t.lower() for _, t in env.workload_profiles} if env else set()
        if (
            env is None
            or any(t.lower() not in have for _, t in wanted)
            or env.provisioning_state != "Succeeded"
            or env.logs_workspace is None  # made before its console lines went to Log Analytics
        ):
            (first_name, first_type), *rest = wanted
            if env is not None:  # keep the profiles it has; a PUT with fewer would remove them
                rest += [
                    (n, t)
                    for n, t in env.workload_profiles
                    if t.lower() not in {x.lower() for _, x in wanted} and t != "Consumption"
                ]
            # the runs' console lines also go to a workspace in the environment's group, where they
            # outlive a replica that printed and exited at once (docs/run.md)
            step.update("Log Analytics workspace for the runs' console lines")
            workspace = naming.logs_workspace_name(plan.names.environment)
            logs = cloud.ensure_logs_workspace(rg, workspace, plan.location, tags)
            cloud.create_environment(
                EnvSpec(
                    resource_group=rg,
                    name=plan.names.environment,
                    location=plan.location,
                    tags=tags,
                    gpu_profile_name=first_name,
                    gpu_profile_type=first_type,
                    extra_gpu_profiles=tuple(rest),
                    logs=logs,
                )
            )
        step.update(" + ".join(t for _, t in wanted))
    group = cloud.get_resource_group(rg)
    if group is None:
        raise NotFound(f"resource group {rg} vanished right after its environment was made")
    return view(cloud, group)


def delete_env(
    cloud: Cloud, name: str, progress: Progress, *, force: bool, wait: bool, poll: float
) -> dict[str, Any]:
    """Remove the environment; refused (exit 2) while a run is inside it, unless `force`."""
    from aca_gpu.workflow.engine.teardown import teardown_group

    naming.validate_env_name(name)
    names = naming.EnvNames(name)
    group = cloud.get_resource_group(names.resource_group)
    if group is None:
        return {"name": name, "resource_group": names.resource_group, "teardown": _absent()}
    if not naming.is_env_group(dict(group.tags)):
        raise PreflightRefused(f"resource group {names.resource_group} is not an acagpu environment")
    runs = runs_inside(cloud, group.name, name)
    if runs and not force:
        raise PreflightRefused(
            f"environment {name} has run(s) inside: {', '.join(sorted(runs))}",
            code="EnvironmentInUse",
            hint=f"wait for them, or `acagpu env delete {name} --force` (those runs are removed too)",
        )
    for run_group in run_groups(cloud, name):  # --force: the runs go first, billing first
        with progress.step(f"delete run {run_group.name}") as step:
            step.update(teardown_group(cloud, run_group.name, wait_gone=False, poll=poll).status)
    with progress.step(f"delete {names.resource_group}") as step:
        result = teardown_group(cloud, names.resource_group, wait_gone=wait, poll=poll)
        step.update(result.status)
    return {
        "name": name,
        "resource_group": names.resource_group,
        "runs_removed": sorted(runs),
        "teardown": result.as_dict(),
    }


def _absent() -> dict[str, Any]:
    from aca_gpu.workflow.engine.teardown import TeardownResult

    return TeardownResult("absent", verified=True, billing_stopped=True).as_dict()


def renew(cloud: Cloud, group: ResourceGroupInfo) -> None:
    """A run used the environment: last-used now, expiry one idle TTL from now (same PUT, same tags)."""
    cloud.create_resource_group(group.name, group.location, naming.renewed_env_tags(dict(group.tags)))
