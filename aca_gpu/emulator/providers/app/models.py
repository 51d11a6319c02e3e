"""Microsoft.App rules: what a PUT/DELETE/start does to the state, and what can fail."""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from aca_gpu.emulator import catalog, cron, placement
from aca_gpu.emulator.arm import get_ci, rand_suffix, utc_now
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.app import defaults
from aca_gpu.emulator.providers.app.exceptions import (
    MSG_CONTAINERS,
    MSG_ENV_ID,
    MSG_JOB_CONFIG,
    EnvironmentBeingDeleted,
    EnvironmentBusy,
    EnvironmentNotReady,
    InvalidProperty,
    LocationNotAvailable,
    QuotaExceeded,
    ResourceNotFound,
    WorkloadProfileNotFound,
    WorkloadProfilePropertyNotSupported,
    WorkloadProfileTypeNotSupported,
)
from aca_gpu.emulator.providers.app.identity import assign_identity, identity_env
from aca_gpu.emulator.providers.resources import models as rg_models
from aca_gpu.emulator.state import (
    RUN_ID_TAG,
    App,
    Environment,
    Execution,
    Job,
    Replica,
    Revision,
    in_env,
    key,
)
from aca_gpu.emulator.timing import AZURE_2026, DURATIONS, has_tail

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_ENV_WRITABLE = ("appLogsConfiguration", "zoneRedundant")
_ENV_ID_RE = re.compile(
    r"^/subscriptions/[^/]+/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.App/managedEnvironments/(?P<env>[^/]+)$",
    re.IGNORECASE,
)


# ---- environments ------------------------------------------------------------------------------
def env_state(ctx: Ctx, env: Environment) -> str:
    """Create: Waiting -> Succeeded (recorded); an update that adds nodes: InfrastructureSetupInProgress."""
    if env.deleting:
        return "ScheduledForDelete"
    if ctx.clock.now() >= env.ready_at:
        return "Succeeded"
    return "InfrastructureSetupInProgress" if env.updating else "Waiting"


def get_env(ctx: Ctx, rg: str, name: str) -> Environment:
    rg_models.get_rg(ctx, rg)
    env = ctx.state.envs.get(key(rg, name))
    if env is None:
        raise ResourceNotFound("managedEnvironments", name, rg)
    return env


def _profiles(location: str, raw: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The environment's profiles; none at all (recorded: `workloadProfiles` absent or null) makes a
    Consumption-only environment, which stays without profiles rather than gaining a Consumption one."""
    if not raw:
        return []
    profiles: list[dict[str, Any]] = []
    for item in raw or []:
        name = get_ci(item, "name")
        ptype = get_ci(item, "workloadProfileType")
        if not name or not ptype:
            raise InvalidProperty("Each workload profile needs 'name' and 'workloadProfileType'.")
        canonical = catalog.find_type(location, str(ptype))
        if canonical is None:
            raise WorkloadProfileTypeNotSupported(str(ptype), location)
        profile: dict[str, Any] = {"workloadProfileType": canonical, "name": str(name)}
        for prop, field in (("MinimumCount", "minimumCount"), ("MaximumCount", "maximumCount")):
            value = get_ci(item, field)
            if value is None:
                continue
            if catalog.is_consumption_gpu(canonical) or canonical == "Consumption":
                raise WorkloadProfilePropertyNotSupported(prop, canonical)
            profile[field] = int(value)
        profiles.append(profile)
    if not any(p["workloadProfileType"] == "Consumption" for p in profiles):
        profiles.insert(0, {"workloadProfileType": "Consumption", "name": "Consumption"})
    return profiles


def create_or_update_env(ctx: Ctx, rg: str, name: str, body: dict[str, Any]) -> tuple[Environment, bool]:
    group = rg_models.live_rg(ctx, rg)
    location = catalog.normalize_location(str(body.get("location") or ""))
    if location not in catalog.REGIONS:
        raise LocationNotAvailable(str(body.get("location") or ""), ",".join(catalog.REGIONS.values()))
    props = body.get("properties") or {}
    profiles = _profiles(location, get_ci(props, "workloadProfiles"))
    tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    existing = ctx.state.envs.get(key(rg, name))
    if existing is not None:
        if existing.deleting:
            raise EnvironmentBeingDeleted(name)
        before = {p["workloadProfileType"] for p in existing.profiles}
        added = [p for p in profiles if p["workloadProfileType"] not in before]
        if added and env_state(ctx, existing) != "Succeeded":
            raise EnvironmentBusy(name)
        existing.tags = tags
        existing.profiles = profiles
        if body.get("identity") is not None:  # the environment's own identity (pulls from ACR)
            existing.identity = assign_identity(
                ctx, body["identity"], _env_path(ctx, rg, name), existing.identity
            )
        existing.extra.update(
            {k: defaults.drop_nulls(v) for k, v in props.items() if k in _ENV_WRITABLE and v is not None}
        )
        if added:
            # Nodes for a new profile take minutes (~8 min when it is a GPU profile: 490 s in
            # operators' notes of Sep 2026, not public: UNCONFIRMED).
            gpu = any(catalog.gpus(p["workloadProfileType"]) for p in added)
            fault = ctx.faults.fire("slow_create", path=name)
            factor = float(fault.param("factor", "1.5")) if fault else 1.0
            existing.ready_at = ctx.clock.after("env_update_gpu" if gpu else "env_update", factor)
            existing.updating = True
        return existing, False
    for gpu in [
        p["workloadProfileType"] for p in profiles if catalog.is_consumption_gpu(p["workloadProfileType"])
    ]:
        if ctx.faults.fire("quota", path=name, location=location, profile=gpu):
            raise QuotaExceeded()
    digest = hashlib.sha256(f"{rg}/{name}".encode()).hexdigest()
    env = Environment(
        rg=group.name,
        name=name,
        location=location,
        tags=tags,
        profiles=profiles,
        ready_at=_env_create_done(ctx, profiles),
        created=utc_now(),
        default_domain=f"{rand_suffix(8, _LETTERS)}-{digest[:8]}.{location}.azurecontainerapps.io",
        static_ip=f"20.{int(digest[8:10], 16)}.{int(digest[10:12], 16)}.{int(digest[12:14], 16)}",
        extra={k: defaults.drop_nulls(v) for k, v in props.items() if k in _ENV_WRITABLE and v is not None},
    )
    if body.get("identity") is not None:
        env.identity = assign_identity(ctx, body["identity"], _env_path(ctx, rg, name), None)
    ctx.state.envs[key(rg, name)] = env
    return env, True


def _env_path(ctx: Ctx, rg: str, name: str) -> str:
    return (
        f"/subscriptions/{ctx.subscription}/resourceGroups/{rg}/providers/Microsoft.App/managedEnvironments/"
        f"{name}"
    )


def _env_create_done(ctx: Ctx, profiles: list[dict[str, Any]]) -> float:
    """A GPU profile's nodes take ~490 s with the create too (`aca-2026` durations; a third-party
    measurement of late 2026, not public: UNCONFIRMED)."""
    if ctx.clock.azure_2026 and any(catalog.gpus(p["workloadProfileType"]) for p in profiles):
        return ctx.clock.after_seconds(max(DURATIONS["env_create"], AZURE_2026["env_create_gpu"]))
    return ctx.clock.after("env_create")


def patch_env(ctx: Ctx, env: Environment, body: dict[str, Any]) -> Environment:
    """PATCH: the stored environment with the patch merged in (a new profile list replaces the old)."""
    current = {
        "location": env.location,
        "tags": env.tags,
        "identity": env.identity,
        "properties": {"workloadProfiles": env.profiles, **env.extra},
    }
    merged = defaults.merge_patch(current, {k: v for k, v in body.items() if k != "location"})
    updated, _ = create_or_update_env(ctx, env.rg, env.name, merged)
    return updated


def begin_delete_env(ctx: Ctx, env: Environment) -> None:
    if env.deleting:
        return
    env.deleting = True
    fault = ctx.faults.fire("slow_delete", path=env.name, location=env.location)
    # 540 s typical; slow deletes reach the 15 minutes operators report (> 900 s, Sep 2026; not
    # public: UNCONFIRMED)
    factor = float(fault.param("factor", "1.67")) if fault else 1.0
    env.delete_done_at = ctx.clock.after("env_delete", factor)
    for app in ctx.state.apps.values():
        if in_env(app, env):
            ctx.runtime.stop_app_replicas(app)


def env_from_id(ctx: Ctx, env_id: str | None) -> Environment:
    m = _ENV_ID_RE.match(env_id or "")
    if not m:
        raise InvalidProperty(MSG_ENV_ID.format(value=env_id))
    env = get_env(ctx, m.group("rg"), m.group("env"))
    if env.deleting:
        raise EnvironmentBeingDeleted(env.name)
    state = env_state(ctx, env)
    if state != "Succeeded":
        raise EnvironmentNotReady(env.name, state)
    return env


def env_id(ctx: Ctx, item: App | Job) -> str:
    """The id of the environment an app or job runs in, which may sit in another resource group."""
    return (
        f"/subscriptions/{ctx.subscription}/resourceGroups/{item.env_rg}/providers/"
        f"Microsoft.App/managedEnvironments/{item.env}"
    )


def _profile_of(env: Environment, props: dict[str, Any]) -> tuple[str | None, str]:
    """(profile name, type); no name means Consumption, and ARM then echoes "Consumption" (recorded).
    A Consumption-only environment has no profiles to name: its apps and jobs answer no profile name."""
    profile_name = get_ci(props, "workloadProfileName")
    if env.consumption_only:
        if profile_name:
            raise WorkloadProfileNotFound(str(profile_name), env.name)
        return None, "Consumption"
    ptype = env.profile_type(profile_name)
    if ptype is None:
        raise WorkloadProfileNotFound(str(profile_name), env.name)
    return str(profile_name or "Consumption"), ptype


# ARM answers these enums in its own casing whatever the request sent (the CLI sends "single", "manual").
_ENUMS = {
    "activeRevisionsMode": ("Single", "Multiple"),
    "triggerType": ("Manual", "Schedule", "Event"),
}


_TRANSPORTS = ("Auto", "Http", "Http2", "Tcp")  # recorded: the CLI sends "auto", Azure answers "Auto"


def _canonical(raw: Any, values: tuple[str, ...]) -> Any:
    return next((v for v in values if v.lower() == raw.lower()), raw) if isinstance(raw, str) else raw


def _canonical_config(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = defaults.drop_nulls(config)
    for field, values in _ENUMS.items():
        if field in out:
            out[field] = _canonical(out[field], values)
    ingress = out.get("ingress")
    if isinstance(ingress, dict) and "transport" in ingress:
        out["ingress"] = {**ingress, "transport": _canonical(ingress["transport"], _TRANSPORTS)}
    return out


def _check_template(template: dict[str, Any]) -> None:
    containers = template.get("containers") or []
    if not containers or not all(c.get("image") and c.get("name") for c in containers):
        raise InvalidProperty(MSG_CONTAINERS)


# ---- container apps ----------------------------------------------------------------------------
def _provision_kind(profile_type: str) -> str:
    return "app_provision_gpu" if catalog.gpus(profile_type) else "app_provision"


def _app_create_done(ctx: Ctx, profile_type: str, name: str) -> float:
    """A GPU app's create; with `aca-2026` durations one in TAIL_EVERY takes the 710 s tail."""
    kind = _provision_kind(profile_type)
    if ctx.clock.azure_2026 and kind == "app_provision_gpu" and has_tail(name):
        return ctx.clock.after_seconds(AZURE_2026["app_provision_gpu_tail"] * _slow_create(ctx, name))
    return ctx.clock.after(kind, _slow_create(ctx, name))


def _slow_create(ctx: Ctx, name: str) -> float:
    """`slow_create` stretches a create toward the slowest figures seen (a T4 app: up to ~12 min)."""
    fault = ctx.faults.fire("slow_create", path=name)
    return float(fault.param("factor", "12")) if fault else 1.0


def get_app(ctx: Ctx, rg: str, name: str) -> App:
    rg_models.get_rg(ctx, rg)
    app = ctx.state.apps.get(key(rg, name))
    if app is None or app.deleting:
        raise ResourceNotFound("containerApps", name, rg)
    return app


def app_state(ctx: Ctx, app: App) -> str:
    if app.deleting:
        return "Deleting"
    if ctx.clock.now() < app.provisioned_at:
        return "InProgress"
    app.ready_revision = app.latest_revision
    return "Succeeded"


def run_id(ctx: Ctx, rg: str, tags: dict[str, str]) -> str | None:
    group = ctx.state.rgs.get(rg.lower())
    return tags.get(RUN_ID_TAG) or (group.tags.get(RUN_ID_TAG) if group else None)


def create_or_update_app(ctx: Ctx, rg: str, name: str, body: dict[str, Any], *, patch: bool = False) -> App:
    group = rg_models.live_rg(ctx, rg)
    existing = ctx.state.apps.get(key(rg, name))
    if existing is not None and existing.deleting:
        raise ResourceNotFound("containerApps", name, rg)
    props = body.get("properties") or {}
    if existing is not None:
        merged_props = {
            "environmentId": env_id(ctx, existing),
            "workloadProfileName": existing.profile_name,
            "configuration": existing.configuration,
            "template": existing.template,
        }
        if patch:
            merged_props = defaults.merge_patch(merged_props, props)
        else:
            merged_props.update(props)
        props = merged_props
    env = env_from_id(ctx, get_ci(props, "environmentId") or get_ci(props, "managedEnvironmentId"))
    profile_name, ptype = _profile_of(env, props)
    template = defaults.app_template(props.get("template") or {})
    _check_template(template)
    if existing is not None and body.get("identity") is not None:
        existing.identity = defaults.drop_nulls(body["identity"])
    tags = {
        str(k): str(v) for k, v in (body.get("tags") or (existing.tags if existing else {}) or {}).items()
    }
    where = {"location": env.location, "profile": ptype}
    if existing is None and catalog.gpus(ptype) and ctx.faults.fire("quota", path=name, **where):
        raise QuotaExceeded()
    if existing is None:
        count, _ = desired_replicas(template)
        check_gpu_quota(ctx, env.location, ptype, catalog.gpus(ptype) * max(1, count))
        app = App(
            rg=group.name,
            name=name,
            location=env.location,
            tags=tags,
            env=env.name,
            env_rg=env.rg,
            profile_name=profile_name,
            profile_type=ptype,
            configuration=_canonical_config(props.get("configuration") or {}),
            template=template,
            created=utc_now(),
            provisioned_at=_app_create_done(ctx, ptype, name),
            identity=defaults.drop_nulls(body.get("identity") or {"type": "None"}),
        )
        for fault in ("wpfull", "nocapacity"):
            if ctx.faults.fire(fault, path=name, **where):
                app.placement = fault
                break
        ctx.state.apps[key(rg, name)] = app
        new_revision(ctx, app)
        return app
    existing.tags = tags
    existing.configuration = _canonical_config(props.get("configuration") or {})
    existing.profile_name, existing.profile_type = profile_name, ptype
    if template != existing.template or not existing.revisions:
        existing.template = template
        existing.provisioned_at = ctx.clock.after("app_provision")
        new_revision(ctx, existing)
    return existing


def new_revision(ctx: Ctx, app: App) -> Revision:
    for old in app.revisions.values():  # single revision mode: the previous one is deactivated
        if old.active:
            old.active = False
            for rep in old.replicas.values():
                ctx.runtime.stop_replica(rep)
            old.replicas.clear()
    suffix = app.template.get("revisionSuffix") or rand_suffix(7)
    rev = Revision(name=f"{app.name}--{suffix}", template=copy.deepcopy(app.template), created=utc_now())
    app.revisions[rev.name] = rev
    app.latest_revision = rev.name
    ctx.runtime.emit(
        None,
        env=app.env,
        env_rg=app.env_rg,
        rg=app.rg,
        app=app.name,
        reason="ContainerAppUpdate",
        msg=f"Updating containerApp: {app.name}",
    )
    ctx.runtime.emit(
        None,
        env=app.env,
        env_rg=app.env_rg,
        rg=app.rg,
        app=app.name,
        reason="RevisionUpdate",
        msg=f"Updating revision : {rev.name}",
        revision=rev.name,
    )
    if not app.stopped:
        scale_revision(ctx, app, rev)
    return rev


def desired_replicas(template: dict[str, Any]) -> tuple[int, bool]:
    """(replicas to run, scale to zero after the cooldown?) from the revision's scale rule."""
    scale = template.get("scale") or {}
    low = scale.get("minReplicas")
    high = scale.get("maxReplicas")
    if high is not None and int(high) == 0:
        return 0, False
    if low is None or int(low) == 0:
        return 1, True  # activation replica, then scale to zero once the cooldown passes
    return min(int(low), int(high) if high else int(low)), False


def scale_revision(ctx: Ctx, app: App, rev: Revision) -> None:
    count, scale_to_zero = desired_replicas(rev.template)
    if app.placement == "nocapacity":
        rev.unplaced = count  # the revision counts them; no node takes them
        return
    add_replicas(ctx, app, rev, count - len(rev.replicas))
    if scale_to_zero:
        cooldown = float((rev.template.get("scale") or {}).get("cooldownPeriod") or 300)
        rev.scale_in_at = ctx.clock.after_seconds(cooldown + 60.0)


def add_replicas(ctx: Ctx, app: App, rev: Revision, count: int) -> None:
    """`count` more replicas of the revision (a scale rule's decision), each through the platform's
    start phases; under `nocapacity` the revision counts them and no node takes them."""
    if app.placement == "nocapacity":
        rev.unplaced += max(0, count)
        return
    pod = hashlib.sha256(rev.name.encode()).hexdigest()[:9]
    for _ in range(count):
        name = f"{rev.name}-{pod}-{rand_suffix(5)}"
        rev.replicas[name] = ctx.runtime.new_replica(
            kind="app",
            owner=app.name,
            parent=rev.name,
            rg=app.rg,
            env=app.env,
            env_rg=app.env_rg,
            profile_type=app.profile_type,
            template=rev.template,
            run_id=run_id(ctx, app.rg, app.tags),
            name=name,
            secrets=job_secrets(app.configuration),  # an app's secretRef env values, as a job's
            ingress_port=served_port(app),
        )
        if app.placement == "wpfull":
            unplaceable(rev.replicas[name])


def served_port(app: App) -> int:
    """The port an app with external ingress serves on (its container's command runs for real and
    the emulator's ingress forwards to it: emulator/ingress/); 0 for an app without one."""
    ingress = (app.configuration or {}).get("ingress") or {}
    if not isinstance(ingress, dict) or not ingress.get("external"):
        return 0
    try:
        return int(ingress.get("targetPort") or 0)
    except (TypeError, ValueError):
        return 0


WORKLOAD_PROFILE_FULL = "WorkLoad Profile Full"


def unplaceable(rep: Replica) -> None:
    """The replica record capacity exhaustion leaves behind: never placed, saying why."""
    rep.stuck = True
    rep.details = WORKLOAD_PROFILE_FULL


def gpus_in_use(ctx: Ctx, location: str, profile_type: str, *, asked: bool = False) -> int:
    """GPUs held by placed replicas of this profile type in this region (what usages show: one still
    waiting in AssigningReplica holds none); `asked`: every live replica's, placed or waiting (what
    an app's create is weighed against, as before placement took quota)."""
    total = 0
    for rep in ctx.state.replicas():
        env = ctx.state.envs.get(key(rep.env_rg, rep.env))
        here = env is not None and env.location == location
        counted = not rep.gone if asked else placement.placed(rep)
        if counted and rep.profile_type == profile_type and here:
            total += catalog.gpus(profile_type)
    return total


def check_gpu_quota(ctx: Ctx, location: str, profile_type: str, needed: int, *, in_use: bool = True) -> None:
    """A `quota:limit=N` fault is the region's GPU quota for the profile: going past it fails the create.
    A job (`in_use=False`) is refused only when it could never run: its replicas wait for GPUs."""
    limit = ctx.faults.quota_limit(location, profile_type)
    used = gpus_in_use(ctx, location, profile_type, asked=True) if in_use else 0
    if limit is not None and needed and used + needed > limit:
        raise QuotaExceeded()


def stop_app(ctx: Ctx, app: App) -> None:
    app.stopped = True
    ctx.runtime.stop_app_replicas(app)


def start_app(ctx: Ctx, app: App) -> None:
    app.stopped = False
    rev = app.revisions.get(app.latest_revision)
    if rev is not None:
        scale_revision(ctx, app, rev)


def begin_delete_app(ctx: Ctx, app: App) -> None:
    app.deleting = True
    app.delete_done_at = ctx.clock.after("app_delete")
    ctx.runtime.stop_app_replicas(app)


# ---- jobs --------------------------------------------------------------------------------------
def get_job(ctx: Ctx, rg: str, name: str) -> Job:
    rg_models.get_rg(ctx, rg)
    job = ctx.state.jobs.get(key(rg, name))
    if job is None or job.deleting:
        raise ResourceNotFound("jobs", name, rg)
    return job


def job_state(ctx: Ctx, job: Job) -> str:
    if job.deleting:
        return "Deleting"
    return "Succeeded" if ctx.clock.now() >= job.provisioned_at else "InProgress"


def patch_job(ctx: Ctx, job: Job, body: dict[str, Any]) -> Job:
    """PATCH: the stored job with the patch merged in, then validated and stored like a PUT."""
    current = {
        "tags": job.tags,
        "identity": job.identity,
        "properties": {
            "environmentId": env_id(ctx, job),
            "workloadProfileName": job.profile_name,
            "configuration": job.configuration,
            "template": job.template,
        },
    }
    return create_or_update_job(ctx, job.rg, job.name, defaults.merge_patch(current, body))


def create_or_update_job(ctx: Ctx, rg: str, name: str, body: dict[str, Any]) -> Job:
    group = rg_models.live_rg(ctx, rg)
    props = body.get("properties") or {}
    env = env_from_id(ctx, get_ci(props, "environmentId"))
    profile_name, ptype = _profile_of(env, props)
    config = _canonical_config(props.get("configuration") or {})
    for field in ("triggerType", "replicaTimeout"):
        if config.get(field) in (None, ""):
            raise InvalidProperty(MSG_JOB_CONFIG.format(field=field))
    if config["triggerType"] == "Schedule":
        expression = get_ci(config.get("scheduleTriggerConfig") or {}, "cronExpression")
        if not expression:
            raise InvalidProperty(MSG_JOB_CONFIG.format(field="scheduleTriggerConfig.cronExpression"))
        try:
            cron.parse(str(expression))
        except cron.CronError as exc:
            raise InvalidProperty(f"Invalid cron expression '{expression}': {exc}.") from None
    if config["triggerType"] == "Event" and not (config.get("eventTriggerConfig") or {}).get("scale"):
        raise InvalidProperty(MSG_JOB_CONFIG.format(field="eventTriggerConfig.scale"))
    template = defaults.job_template(props.get("template") or {})
    _check_template(template)
    from aca_gpu.emulator.providers.app.storages import check_volumes

    check_volumes(env, template)
    tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    existing = ctx.state.jobs.get(key(rg, name))
    job_id = (
        f"/subscriptions/{ctx.subscription}/resourceGroups/{group.name}/providers/Microsoft.App/jobs/{name}"
    )
    if existing is None or existing.deleting:
        check_gpu_quota(ctx, env.location, ptype, catalog.gpus(ptype) * _parallelism(config), in_use=False)
    if existing is not None and not existing.deleting:
        existing.tags, existing.configuration, existing.template = tags, config, template
        existing.profile_name, existing.profile_type = profile_name, ptype
        if body.get("identity") is not None:
            existing.identity = assign_identity(ctx, body["identity"], job_id, existing.identity)
        existing.provisioned_at = ctx.clock.after("job_provision")
        return existing
    job = Job(
        rg=group.name,
        name=name,
        location=env.location,
        tags=tags,
        env=env.name,
        env_rg=env.rg,
        profile_name=profile_name,
        profile_type=ptype,
        configuration=config,
        template=template,
        created=utc_now(),
        provisioned_at=ctx.clock.after("job_provision"),
        identity=assign_identity(ctx, body.get("identity"), job_id, None),
    )
    ctx.state.jobs[key(rg, name)] = job
    return job


def _parallelism(config: dict[str, Any]) -> int:
    trigger = {"Schedule": "scheduleTriggerConfig", "Event": "eventTriggerConfig"}.get(
        str(config.get("triggerType")), "manualTriggerConfig"
    )
    return int((config.get(trigger) or {}).get("parallelism") or 1)


def job_secrets(configuration: dict[str, Any]) -> dict[str, str]:
    """Secret name -> value, for the env vars that reference them (`secretRef`)."""
    found = configuration.get("secrets") or []
    return {
        str(s.get("name")): str(s.get("value") or "") for s in found if isinstance(s, dict) and s.get("name")
    }


def start_job(ctx: Ctx, job: Job, override: dict[str, Any] | None, *, trigger: str = "Manual") -> Execution:
    template = copy.deepcopy(job.template)
    if override and override.get("containers"):
        template["containers"] = override["containers"]
    if override and override.get("initContainers"):
        template["initContainers"] = override["initContainers"]
    _check_template(template)
    ex = Execution(name=f"{job.name}-{rand_suffix(7)}", template=template, started=utc_now(), trigger=trigger)
    parallelism = _parallelism(job.configuration)
    retry_limit = int(job.configuration.get("replicaRetryLimit") or 0)
    timeout = float(job.configuration.get("replicaTimeout") or 1800)
    # Simulated containers live on the scaled clock; the host workload runs real processes in real
    # time, so its deadline must be real seconds too or a scaled one would kill a healthy run.
    real_time = getattr(ctx.runtime.workload, "kind", "simulated") == "host"
    ex.deadline = ctx.clock.now() + timeout if real_time else ctx.clock.after_seconds(timeout)
    ex.real_deadline = ctx.clock.now() + timeout  # once its replica runs a real process (runtime.py)
    for _ in range(parallelism):
        name = f"{ex.name}-{rand_suffix(5)}"
        ex.replicas[name] = ctx.runtime.new_replica(
            kind="job",
            owner=job.name,
            parent=ex.name,
            rg=job.rg,
            env=job.env,
            env_rg=job.env_rg,
            profile_type=job.profile_type,
            template=template,
            run_id=run_id(ctx, job.rg, job.tags),
            name=name,
            retry_limit=retry_limit,
            secrets=job_secrets(job.configuration),
            extra_env={
                "CONTAINER_APP_JOB_NAME": job.name,
                "CONTAINER_APP_JOB_EXECUTION_NAME": ex.name,
                "CONTAINER_APP_REPLICA_NAME": name,
                **identity_env(ctx, job.identity),
            },
        )
        ex.replica_names.append(name)
        where = {"location": job.location, "profile": job.profile_type}
        if ctx.faults.fire("wpfull", path=name, **where):
            unplaceable(ex.replicas[name])
        elif ctx.faults.fire("nocapacity", path=name, **where):
            ex.replicas[name].stuck = True  # never assigned to a node
    job.executions[ex.name] = ex
    placement.mark_reported(ctx.runtime, job, ex)
    ctx.runtime.emit(
        None,
        env=job.env,
        env_rg=job.env_rg,
        rg=job.rg,
        app=job.name,
        revision=ex.name,
        reason="SuccessfulCreate",
        msg=f"Created pod: {ex.replica_names[0]}",
    )
    return ex


def get_execution(ctx: Ctx, job: Job, name: str) -> Execution:
    ex = job.executions.get(name)
    if ex is None:
        raise ResourceNotFound(f"jobs/{job.name}/executions", name, job.rg)
    return ex


def stop_execution(ctx: Ctx, job: Job, ex: Execution) -> None:
    if ex.status == "Running":
        ctx.runtime.finish_execution(job, ex, "Stopped")


def begin_delete_job(ctx: Ctx, job: Job) -> None:
    ctx.state.principals.pop(str(job.identity.get("principalId") or ""), None)  # a system identity goes too
    job.deleting = True
    job.delete_done_at = ctx.clock.after("job_delete")
    for ex in job.executions.values():
        stop_execution(ctx, job, ex)
