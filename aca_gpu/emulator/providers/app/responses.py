"""Microsoft.App handlers (named after the ARM operation ids): parse, call the models, shape the reply."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from aca_gpu.emulator import catalog, placement, versions
from aca_gpu.emulator.arm import empty_response, iso_ticks, json_response, new_op_id, read_json, utc_now
from aca_gpu.emulator.auth import Scope
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.app import models, shapes
from aca_gpu.emulator.providers.app.exceptions import GatewayTimeout, InvalidProperty, ResourceNotFound
from aca_gpu.emulator.state import App, Environment, Job, Operation, Revision, in_env

WRITES = {"x-ms-ratelimit-remaining-subscription-writes": "1199"}


def _ticks() -> int:
    """.NET ticks (100 ns since 0001-01-01), the form of the signed operation URLs' `t` parameter."""
    return int((utc_now().timestamp() + 62135596800) * 10_000_000)


def _ops_base(ctx: Ctx, location: str) -> str:
    return f"{ctx.endpoint}/subscriptions/{ctx.subscription}/providers/Microsoft.App/locations/{location}"


AppOrJob = TypeVar("AppOrJob", App, Job)


def _live_in(items: Iterable[AppOrJob], rg: str | None) -> list[AppOrJob]:
    """Resources not being deleted, in one resource group or (rg None) the whole subscription."""
    return [x for x in items if not x.deleting and (rg is None or x.rg.lower() == rg.lower())]


def _delete_accepted(
    ctx: Ctx, req: web.Request, item: App | Job, table: Mapping[tuple[str, str], Any], kind: str
) -> web.StreamResponse:
    """202 + Location; the operation succeeds once the resource has left its table."""
    k = (item.rg.lower(), item.name.lower())
    op = _new_op(ctx, kind, item.location, lambda: "InProgress" if k in table else "Succeeded")
    return empty_response(202, location_header(ctx, req, op))


def _new_op(
    ctx: Ctx,
    kind: str,
    location: str,
    check: Callable[[], str],
    *,
    final_status: int = 204,
    result: Callable[[], Any] | None = None,
) -> Operation:
    op = Operation(
        id=new_op_id(),
        kind=kind,
        location=location,
        started=utc_now(),
        check=check,
        final_status=final_status,
        result=result,
    )
    ctx.state.operations[op.id] = op
    return op


def async_operation_header(ctx: Ctx, req: web.Request, op: Operation) -> dict[str, str]:
    version = req.query.get("api-version", "")
    url = f"{_ops_base(ctx, op.location)}/{op.kind}Statuses/{op.id}"
    return {"Azure-AsyncOperation": f"{url}?api-version={version}&azureAsyncOperation=true"}


def location_header(ctx: Ctx, req: web.Request, op: Operation) -> dict[str, str]:
    version = req.query.get("api-version", "")
    return {"Location": f"{_ops_base(ctx, op.location)}/{op.kind}Results/{op.id}?api-version={version}"}


CANCELED = "Canceled"
DELETING = frozenset({"Deleting", "ScheduledForDelete"})


def _create_check(state: Callable[[], str]) -> Callable[[], str]:
    """A create's operation: InProgress until its resource is provisioned; `Canceled` once the
    resource is being deleted before that (its group deleted, or it, by another client). Without
    an end, a client polling the operation would poll for ever (UNCONFIRMED: how ARM ends such an
    operation is not recorded; `Canceled` is one of its terminal statuses)."""

    def check() -> str:
        now = state()
        if now == "Succeeded":
            return "Succeeded"
        return CANCELED if now in DELETING else "InProgress"

    return check


async def operation_status(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    op = ctx.state.operations.get(p["op"])
    if op is None:
        raise ResourceNotFound("locations/operationStatuses", p["op"], "")
    status = op.check()
    body: dict[str, Any] = {
        "id": f"/subscriptions/{ctx.subscription}/providers/Microsoft.App/locations/{op.location}/"
        f"{op.kind}Statuses/{op.id}",
        "name": op.id,
        "status": status,
        "startTime": iso_ticks(op.started),
    }
    if status == CANCELED:
        body["error"] = {
            "code": "OperationCanceled",
            "message": "The operation was canceled: the resource was deleted before it was provisioned.",
        }
    return json_response(body)


async def operation_result(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    op = ctx.state.operations.get(p["op"])
    if op is None:
        raise ResourceNotFound("locations/operationResults", p["op"], "")
    if op.check() == "InProgress":
        # recorded: each 202 carries a freshly signed Location (a new `t`) for the same operation
        return empty_response(202, {"Location": str(req.url.update_query(t=str(_ticks())))})
    if op.result is not None:
        return json_response(op.result(), status=op.final_status)
    return empty_response(op.final_status)


# ---- catalog -----------------------------------------------------------------------------------
async def available_workload_profiles_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(catalog.available_profiles_body(ctx.subscription, p["location"]))


async def usages_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    loc = catalog.normalize_location(p["location"])
    envs = [e for e in ctx.state.envs.values() if e.location == loc]
    in_use = {ptype: models.gpus_in_use(ctx, loc, ptype) for ptype in catalog.GPU_QUOTA_NAMES}
    limits = {ptype: ctx.faults.quota_limit(loc, ptype) for ptype in catalog.GPU_QUOTA_NAMES}
    return json_response(catalog.usages_body(loc, len(envs), in_use, limits))


# ---- managed environments ----------------------------------------------------------------------
def _env_op(ctx: Ctx, env: Environment) -> Operation:
    return _new_op(
        ctx,
        "managedEnvironmentOperation",
        env.location,
        _create_check(lambda: models.env_state(ctx, env)),
        final_status=200,
        result=lambda: shapes.env_body(ctx, env),
    )


async def managed_environments_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env, created = models.create_or_update_env(ctx, p["rg"], p["name"], read_json(await req.read()))
    answer = shapes.put_answer(shapes.env_body(ctx, env), created=created)
    if models.env_state(ctx, env) == "Succeeded":
        return json_response(answer, status=200)
    headers = async_operation_header(ctx, req, _env_op(ctx, env))
    return json_response(answer, status=201 if created else 200, headers=headers)


async def managed_environments_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """PATCH (`az containerapp env workload-profile add` uses it): 202 + Location, as recorded for the
    workload-profile add; minutes-long when the patch adds profile nodes."""
    env = models.patch_env(ctx, models.get_env(ctx, p["rg"], p["name"]), read_json(await req.read()))
    return empty_response(202, location_header(ctx, req, _env_op(ctx, env)))


async def managed_environments_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(shapes.env_body(ctx, models.get_env(ctx, p["rg"], p["name"])))


async def managed_environments_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    rg = p.get("rg")
    envs = [e for e in ctx.state.envs.values() if rg is None or e.rg.lower() == rg.lower()]
    return json_response({"value": [shapes.env_body(ctx, e) for e in envs]})


async def managed_environments_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    try:
        env = models.get_env(ctx, p["rg"], p["name"])
    except ResourceNotFound:
        return empty_response(204)
    models.begin_delete_env(ctx, env)
    k = (env.rg.lower(), env.name.lower())
    op = _new_op(
        ctx,
        "managedEnvironmentOperation",
        env.location,
        lambda: "InProgress" if k in ctx.state.envs else "Succeeded",
    )
    return empty_response(202, location_header(ctx, req, op))


async def managed_environments_get_auth_token(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env = models.get_env(ctx, p["rg"], p["name"])
    token, expires = ctx.minter.mint(Scope(ctx.subscription, env.rg, environment=env.name))
    return json_response(
        {
            "location": catalog.display_location(env.location),
            "properties": {"token": token, "expires": expires},
            "id": shapes.env_id(ctx, env.rg, env.name),
            "name": env.name,
            "type": "Microsoft.App/environments/accesstoken",
        },
        headers=WRITES,
    )


async def managed_environment_usages_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """The three recorded entries, then one per GPU type of the environment's profiles: the GPUs its
    placed replicas hold and the quota (GPU quota is per environment since 2026-09, Microsoft Learn's
    "Quotas for Azure Container Apps"; the entry's shape is the regional one's, UNCONFIRMED at this
    scope). The limit is the region's `quota:limit=`, enforced over all the region's environments
    together (placement.py)."""
    env = models.get_env(ctx, p["rg"], p["name"])
    body = catalog.env_usages_body()
    types = {str(prof.get("workloadProfileType")) for prof in env.profiles}
    for ptype, (value_name, localized) in catalog.GPU_QUOTA_NAMES.items():
        if ptype not in types:
            continue
        used = sum(
            catalog.gpus(rep.profile_type)
            for rep in ctx.state.replicas()
            if placement.placed(rep) and rep.profile_type == ptype and in_env(rep, env)
        )
        limit = ctx.faults.quota_limit(env.location, ptype)
        body["value"].append(
            {
                "name": {"value": value_name, "localizedValue": localized},
                "usage": used,
                "currentValue": used,
                "limit": catalog.GPU_LIMIT if limit is None else limit,
                "unit": "Count",
            }
        )
    return json_response(body)


async def managed_environments_list_workload_profile_states(
    ctx: Ctx, req: web.Request, p: Params
) -> web.StreamResponse:
    env = models.get_env(ctx, p["rg"], p["name"])
    value = []
    for prof in env.profiles:
        current = sum(
            1
            for r in ctx.state.replicas()
            if not r.gone and in_env(r, env) and r.profile_type == prof["workloadProfileType"]
        )
        value.append(
            {
                "name": prof["name"],
                "id": f"{shapes.env_id(ctx, env.rg, env.name)}/workloadProfileStates/{prof['name']}",
                "type": "Microsoft.App/managedEnvironments/workloadProfileStates",
                "properties": {  # the replays show the profile's name and type here too
                    "name": prof["name"],
                    "workloadProfileType": prof["workloadProfileType"],
                    "minimumCount": prof.get("minimumCount"),
                    "maximumCount": prof.get("maximumCount"),
                    "currentCount": current,
                },
            }
        )
    return json_response({"value": value})


# ---- container apps ----------------------------------------------------------------------------
def _app_op(ctx: Ctx, app: App) -> Operation:
    return _new_op(
        ctx,
        "containerappOperation",
        app.location,
        _create_check(lambda: models.app_state(ctx, app)),
        final_status=200,
        result=lambda: shapes.app_body(ctx, app),
    )


async def container_apps_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    app = models.create_or_update_app(ctx, p["rg"], p["name"], read_json(await req.read()))
    op = _app_op(ctx, app)
    if app.placement == "wpfull" and len(app.revisions) == 1:
        raise GatewayTimeout()  # the app exists; its replica waits on a full profile (#1705)
    # recorded: 201 for a replace too (the update is a new long-running operation), not ARM's usual 200
    answer = shapes.put_answer(shapes.app_body(ctx, app), created=True)
    return json_response(answer, status=201, headers=async_operation_header(ctx, req, op))


async def container_apps_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    models.get_app(ctx, p["rg"], p["name"])
    app = models.create_or_update_app(ctx, p["rg"], p["name"], read_json(await req.read()), patch=True)
    op = _app_op(ctx, app)
    # recorded: an app's PATCH names its operation both ways, Azure-AsyncOperation and Location
    return empty_response(202, {**async_operation_header(ctx, req, op), **location_header(ctx, req, op)})


async def container_apps_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(shapes.app_body(ctx, models.get_app(ctx, p["rg"], p["name"])))


async def container_apps_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    apps = _live_in(ctx.state.apps.values(), p.get("rg"))
    return json_response({"value": [shapes.app_body(ctx, a) for a in apps]})


async def container_apps_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    try:
        app = models.get_app(ctx, p["rg"], p["name"])
    except ResourceNotFound:
        return empty_response(204)
    models.begin_delete_app(ctx, app)
    return _delete_accepted(ctx, req, app, ctx.state.apps, "containerappOperation")


async def container_apps_stop(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    app = models.get_app(ctx, p["rg"], p["name"])
    models.stop_app(ctx, app)
    return empty_response(202, location_header(ctx, req, _app_op(ctx, app)))


async def container_apps_start(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    app = models.get_app(ctx, p["rg"], p["name"])
    models.start_app(ctx, app)
    return empty_response(202, location_header(ctx, req, _app_op(ctx, app)))


async def container_apps_get_auth_token(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    app = models.get_app(ctx, p["rg"], p["name"])
    token, expires = ctx.minter.mint(Scope(ctx.subscription, app.rg, app=app.name))
    return json_response(
        {
            "location": catalog.display_location(app.location),
            "properties": {"token": token, "expires": expires},
            "id": f"{shapes.rg_path(ctx, app.rg)}/providers/Microsoft.App/containerapps/{app.name}",
            "name": app.name,
            "type": "Microsoft.App/containerApps/accesstoken",
        },
        headers=WRITES,
    )


def _secrets(configuration: dict[str, Any]) -> web.StreamResponse:
    """The one answer that carries secret values: GETs of the app or job give their names only."""
    stored = [s for s in configuration.get("secrets") or [] if isinstance(s, dict)]
    # recorded: name and value; a Key Vault reference's fields only when the secret has them
    value = [{k: v for k, v in s.items() if k in ("name", "value") or v not in (None, "")} for s in stored]
    return json_response({"value": value}, headers=WRITES)


async def container_apps_list_secrets(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return _secrets(models.get_app(ctx, p["rg"], p["name"]).configuration)


async def jobs_list_secrets(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return _secrets(models.get_job(ctx, p["rg"], p["name"]).configuration)


async def container_apps_revisions_list_revisions(
    ctx: Ctx, req: web.Request, p: Params
) -> web.StreamResponse:
    app = models.get_app(ctx, p["rg"], p["name"])
    return json_response({"value": [shapes.revision_body(ctx, app, r) for r in app.revisions.values()]})


def _revision(ctx: Ctx, p: Params) -> tuple[App, Revision]:
    app = models.get_app(ctx, p["rg"], p["name"])
    rev = app.revisions.get(p["rev"])
    if rev is None:
        raise ResourceNotFound(f"containerApps/{app.name}/revisions", p["rev"], app.rg)
    return app, rev


async def container_apps_revisions_get_revision(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    app, rev = _revision(ctx, p)
    return json_response(shapes.revision_body(ctx, app, rev))


async def container_apps_revision_replicas_list_replicas(
    ctx: Ctx, req: web.Request, p: Params
) -> web.StreamResponse:
    app, rev = _revision(ctx, p)
    return json_response(
        {"value": [shapes.app_replica_body(ctx, app, rev, r) for r in rev.replicas.values()]}
    )


async def container_apps_revision_replicas_get_replica(
    ctx: Ctx, req: web.Request, p: Params
) -> web.StreamResponse:
    app, rev = _revision(ctx, p)
    rep = rev.replicas.get(p["replica"])
    if rep is None:
        raise ResourceNotFound(
            f"containerApps/{app.name}/revisions/{rev.name}/replicas", p["replica"], app.rg
        )
    return json_response(shapes.app_replica_body(ctx, app, rev, rep))


# ---- jobs --------------------------------------------------------------------------------------
def _job_op(ctx: Ctx, job: Job) -> Operation:
    return _new_op(
        ctx,
        "containerappsjobOperation",
        job.location,
        _create_check(lambda: models.job_state(ctx, job)),
        final_status=200,
        result=lambda: shapes.job_body(ctx, job),
    )


async def jobs_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    job = models.create_or_update_job(ctx, p["rg"], p["name"], read_json(await req.read()))
    op = _job_op(ctx, job)
    return json_response(shapes.job_body(ctx, job), status=201, headers=async_operation_header(ctx, req, op))


async def jobs_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    job = models.patch_job(ctx, models.get_job(ctx, p["rg"], p["name"]), read_json(await req.read()))
    op = _job_op(ctx, job)
    op.check = _polled_once(op.check)
    return empty_response(202, location_header(ctx, req, op))


def _polled_once(check: Callable[[], str]) -> Callable[[], str]:
    """Recorded: a job's PATCH is still InProgress (202) at its first poll, however quick the update."""
    polls = 0

    def first_in_progress() -> str:
        nonlocal polls
        polls += 1
        return "InProgress" if polls == 1 else check()

    return first_in_progress


async def jobs_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    return json_response(shapes.job_body(ctx, models.get_job(ctx, p["rg"], p["name"])))


async def jobs_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    jobs = _live_in(ctx.state.jobs.values(), p.get("rg"))
    return json_response({"value": [shapes.job_body(ctx, j) for j in jobs]})


async def jobs_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    try:
        job = models.get_job(ctx, p["rg"], p["name"])
    except ResourceNotFound:
        return empty_response(204)
    models.begin_delete_job(ctx, job)
    return _delete_accepted(ctx, req, job, ctx.state.jobs, "containerappsjobOperation")


async def jobs_start(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    job = models.get_job(ctx, p["rg"], p["name"])
    body = read_json(await req.read())
    ex = models.start_job(ctx, job, body.get("template") if "template" in body else body or None)
    return json_response(
        {
            "id": f"{shapes.rg_path(ctx, job.rg)}/providers/Microsoft.App/jobs/{job.name}/executions/"
            f"{ex.name}",
            "name": ex.name,
        },
        headers=WRITES,
    )


# How many executions one page of JobsExecutions_List holds: Azure pages with `nextLink` but its
# page size is not documented (UNCONFIRMED); 100, the history kept for scheduled and event jobs.
EXECUTIONS_PAGE = 100


async def jobs_executions_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """Newest first, EXECUTIONS_PAGE at a time; `nextLink` carries the offset (`$skipToken`)."""
    job = models.get_job(ctx, p["rg"], p["name"])
    execs = sorted(job.executions.values(), key=lambda e: (e.started, e.name), reverse=True)
    detailed = versions.answers_detailed_status(req.query.get("api-version"))
    try:
        skip = max(0, int(req.query.get("$skipToken", "0")))
    except ValueError:
        raise InvalidProperty("The $skipToken of this nextLink is not one the service gave.") from None
    page = execs[skip : skip + EXECUTIONS_PAGE]
    body: dict[str, Any] = {"value": [shapes.execution_body(ctx, job, e, detailed=detailed) for e in page]}
    if skip + EXECUTIONS_PAGE < len(execs):
        query = {k: v for k, v in req.query.items() if k != "$skipToken"}
        body["nextLink"] = str(
            req.url.with_scheme("https").with_query({**query, "$skipToken": str(skip + EXECUTIONS_PAGE)})
        )
    return json_response(body)


async def job_execution(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    job = models.get_job(ctx, p["rg"], p["name"])
    ex = models.get_execution(ctx, job, p["execution"])
    detailed = versions.answers_detailed_status(req.query.get("api-version"))
    return json_response(shapes.execution_body(ctx, job, ex, detailed=detailed))


async def jobs_stop_execution(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    job = models.get_job(ctx, p["rg"], p["name"])
    ex = models.get_execution(ctx, job, p["execution"])
    models.stop_execution(ctx, job, ex)
    op = _new_op(ctx, "containerappsjobOperation", job.location, lambda: "Succeeded", final_status=200)
    return empty_response(202, location_header(ctx, req, op))


async def jobs_stop_multiple_executions(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """Jobs_StopMultipleExecutions (`POST jobs/{job}/stop`): every running execution of the job stops,
    as one write (a fan-out's Ctrl-C); 202 + Location, whose result lists the executions it stopped."""
    job = models.get_job(ctx, p["rg"], p["name"])
    stopped = [ex for ex in job.executions.values() if ex.status == "Running"]
    for ex in stopped:
        models.stop_execution(ctx, job, ex)
    detailed = versions.answers_detailed_status(req.query.get("api-version"))

    def result() -> dict[str, Any]:
        return {"value": [shapes.execution_body(ctx, job, ex, detailed=detailed) for ex in stopped]}

    op = _new_op(
        ctx, "containerappsjobOperation", job.location, lambda: "Succeeded", final_status=200, result=result
    )
    return empty_response(202, location_header(ctx, req, op))


async def jobs_stop_execution_cli(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """The Azure CLI's `POST jobs/{job}/stop/{execution}`: 200 with a bare JSON string (recorded at
    2024-03-01); from 2025-07-01 on, 200 with no body (recorded November 2025)."""
    job = models.get_job(ctx, p["rg"], p["name"])
    ex = models.get_execution(ctx, job, p["execution"])
    models.stop_execution(ctx, job, ex)
    if req.query.get("api-version", "")[:10] >= "2025-07-01":
        return empty_response(200, WRITES)
    return json_response(f"Job Execution: {ex.name}, stopped successfully.", headers=WRITES)


async def jobs_get_auth_token(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """Preview endpoint (2023-11-02-preview) the Azure CLI uses for job logs."""
    job = models.get_job(ctx, p["rg"], p["name"])
    token, expires = ctx.minter.mint(Scope(ctx.subscription, job.rg, app=job.name))
    return json_response(
        {
            "location": catalog.display_location(job.location),
            "properties": {"token": token, "expires": expires},
            "id": f"{shapes.rg_path(ctx, job.rg)}/providers/Microsoft.App/jobs/{job.name}",
            "name": job.name,
            "type": "Microsoft.App/jobs/accesstoken",
        },
        headers=WRITES,
    )


async def job_execution_replicas_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    """Preview endpoint: the execution's live replicas (empty once the execution has ended)."""
    job = models.get_job(ctx, p["rg"], p["name"])
    ex = models.get_execution(ctx, job, p["execution"])
    return json_response({"value": [shapes.job_replica_body(ctx, job, ex, r) for r in ex.replicas.values()]})
