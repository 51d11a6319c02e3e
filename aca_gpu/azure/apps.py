"""Managed environments, container apps, jobs, replicas and ACA data-plane tokens.

Request bodies are REST-shaped dicts wrapped in SDK models, so what is sent is visible in one place
and tests compare it field by field; a body is always built here, never a document read back from
the server. Job start (whose answer may be 200 `{id,name}` or 202 + Location) goes through
`send_request`; the preview-only calls live in preview.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from aca_gpu.azure import api_versions
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.polling import BackoffPolling
from aca_gpu.azure.resources import as_json, props
from aca_gpu.azure.translate import arm_error_fields, make_error, or_none, retrying, translate_errors
from aca_gpu.errors import CloudError, InfraError, NotFound, PreflightRefused, WaitTimedOut, is_throttled
from aca_gpu.models import (
    FINAL_EXECUTION_STATES,
    AppInfo,
    AppSpec,
    ContainerDef,
    EnvInfo,
    EnvSpec,
    EventTrigger,
    ExecutionInfo,
    JobInfo,
    JobSpec,
    RegistryCred,
    ReplicaContainerInfo,
    ReplicaInfo,
)
from aca_gpu.naming import TAG_MANAGED, is_managed

T = TypeVar("T")

CONSUMPTION = "Consumption"
JOB_START_TIMEOUT_S = 300.0
START_ATTEMPTS = 3
THROTTLED_PATIENCE_S = 600.0  # a start refused for ARM's rate is sent again this long, never counted
DELETE_WAIT_S = 600.0  # the caller verifies absence; a slower delete is reported, never waited forever


def is_consumption_type(profile_type: str) -> bool:
    """Consumption and Consumption-GPU-* profiles take no min/max counts (ARM refuses them:
    WorkloadProfilePropertyNotSupported)."""
    return profile_type.lower().startswith(CONSUMPTION.lower())


def _q(value: str) -> str:
    return quote(value, safe="")


def app_path(clients: Clients, rg: str) -> str:
    return f"/subscriptions/{_q(clients.subscription_id)}/resourceGroups/{_q(rg)}/providers/Microsoft.App"


# ---- request bodies -------------------------------------------------------------------------


def _gpu_profile(name: str, profile_type: str, counts: tuple[int, int] | None) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": name, "workloadProfileType": profile_type}
    if not is_consumption_type(profile_type):  # the service rejects min/max on Consumption-GPU-*
        low, high = counts or (1, 1)
        gpu["minimumCount"] = low
        gpu["maximumCount"] = high
    return gpu


def environment_body(spec: EnvSpec) -> dict[str, Any]:
    profiles = [
        {"name": CONSUMPTION, "workloadProfileType": CONSUMPTION},
        _gpu_profile(spec.gpu_profile_name, spec.gpu_profile_type, spec.dedicated_counts),
    ]
    profiles += [_gpu_profile(name, kind, None) for name, kind in spec.extra_gpu_profiles]
    properties: dict[str, Any] = {"workloadProfiles": profiles}
    if spec.logs is not None:  # console lines kept in Log Analytics: read after the replica is gone
        properties["appLogsConfiguration"] = {
            "destination": "log-analytics",
            "logAnalyticsConfiguration": {
                "customerId": spec.logs.workspace_id,
                "sharedKey": spec.logs.shared_key,
            },
        }
    return {"location": spec.location, "tags": dict(spec.tags), "properties": properties}


def container_body(container: ContainerDef) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": container.name,
        "image": container.image,
        "resources": {"cpu": container.cpu, "memory": container.memory},
    }
    if container.command:
        body["command"] = list(container.command)
    if container.args:
        body["args"] = list(container.args)
    env = [{"name": k, "value": v} for k, v in container.env.items()]
    env += [{"name": k, "secretRef": ref} for k, ref in container.secret_env.items()]
    if env:
        body["env"] = env
    if container.mounts:
        body["volumeMounts"] = [{"volumeName": v, "mountPath": path} for v, path in container.mounts]
    return body


def _registry_body(cred: RegistryCred) -> dict[str, Any]:
    if cred.identity:
        return {"server": cred.server, "identity": cred.identity}
    return {"server": cred.server, "username": cred.username, "passwordSecretRef": cred.password_secret}


def _volumes(spec: JobSpec) -> dict[str, Any]:
    if not spec.volumes:
        return {}
    return {
        "volumes": [
            {"name": v, "storageType": "AzureFile", "storageName": storage} for v, storage in spec.volumes
        ]
    }


def environment_storages(clients: Clients, rg: str, environment: str) -> list[str]:
    """The names of an environment's storages (Azure Files shares its apps and jobs can mount)."""
    found = retrying(
        "list environment storages",
        environment,
        lambda: clients.apps.managed_environments_storages.list(rg, environment),
    )
    return [str(item.name) for item in (getattr(found, "value", None) or [])]


def app_body(spec: AppSpec) -> dict[str, Any]:
    return {
        "location": spec.location,
        "tags": dict(spec.tags),
        "properties": {
            "environmentId": spec.environment_id,
            "workloadProfileName": spec.workload_profile_name,
            "configuration": {"activeRevisionsMode": "Single"},
            "template": {
                "containers": [container_body(spec.container)],
                "scale": {"minReplicas": spec.min_replicas, "maxReplicas": spec.max_replicas},
            },
        },
    }


def _event_trigger(event: EventTrigger) -> dict[str, Any]:
    """KEDA's azure-queue rule, signed in with the job's system identity: no key in the template."""
    return {
        "replicaCompletionCount": 1,
        "parallelism": 1,
        "scale": {
            "minExecutions": event.min_executions,
            "maxExecutions": event.max_executions,
            "pollingInterval": event.polling_interval_s,
            "rules": [
                {
                    "name": "queue",
                    "type": "azure-queue",
                    "metadata": {
                        "accountName": event.account,
                        "queueName": event.queue,
                        "queueLength": str(event.queue_length),
                    },
                    "identity": "system",
                }
            ],
        },
    }


def job_body(spec: JobSpec) -> dict[str, Any]:
    configuration: dict[str, Any] = {
        "triggerType": "Manual",
        "replicaTimeout": spec.replica_timeout_s,
        "replicaRetryLimit": spec.retry_limit,
        "manualTriggerConfig": {"replicaCompletionCount": 1, "parallelism": 1},
    }
    if spec.event is not None:
        del configuration["manualTriggerConfig"]
        configuration.update(triggerType="Event", eventTriggerConfig=_event_trigger(spec.event))
    if spec.secrets:
        configuration["secrets"] = [{"name": k, "value": v} for k, v in spec.secrets.items()]
    if spec.registries:
        configuration["registries"] = [_registry_body(r) for r in spec.registries]
    body: dict[str, Any] = {
        "location": spec.location,
        "tags": dict(spec.tags),
        "properties": {
            "environmentId": spec.environment_id,
            "workloadProfileName": spec.workload_profile_name,
            "configuration": configuration,
            "template": {"containers": [container_body(spec.container)], **_volumes(spec)},
        },
    }
    if spec.event is not None:
        body["identity"] = {"type": "SystemAssigned"}
    return body


# ---- response records ------------------------------------------------------------------------


def _nonempty(value: Any) -> str | None:
    return str(value) if value else None


def env_info(obj: Any, rg: str) -> EnvInfo:
    doc = as_json(obj)
    p = props(doc)
    return EnvInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        location=str(doc.get("location", "")),
        provisioning_state=p.get("provisioningState"),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        tags=dict(doc.get("tags") or {}),
        workload_profiles=tuple(
            (str(w.get("name", "")), str(w.get("workloadProfileType", "")))
            for w in p.get("workloadProfiles") or []
            if isinstance(w, Mapping)
        ),
        logs_workspace=_logs_workspace(p.get("appLogsConfiguration")),
    )


def _logs_workspace(config: Any) -> str | None:
    """The customerId of a `log-analytics` destination (an `azure-monitor` one is read otherwise)."""
    if not isinstance(config, Mapping) or str(config.get("destination") or "").lower() != "log-analytics":
        return None
    analytics = config.get("logAnalyticsConfiguration")
    return _nonempty(analytics.get("customerId")) if isinstance(analytics, Mapping) else None


def app_info(obj: Any, rg: str) -> AppInfo:
    doc = as_json(obj)
    p = props(doc)
    scale = (p.get("template") or {}).get("scale") or {}
    return AppInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        provisioning_state=p.get("provisioningState"),
        running_status=p.get("runningStatus"),
        latest_revision=_nonempty(p.get("latestRevisionName")),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        min_replicas=scale.get("minReplicas"),
        max_replicas=scale.get("maxReplicas"),
        tags=dict(doc.get("tags") or {}),
    )


def job_info(obj: Any, rg: str) -> JobInfo:
    doc = as_json(obj)
    p = props(doc)
    return JobInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        provisioning_state=p.get("provisioningState"),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        tags=dict(doc.get("tags") or {}),
        principal_id=_nonempty((doc.get("identity") or {}).get("principalId")),
    )


def replica_info(obj: Any) -> ReplicaInfo:
    doc = as_json(obj)
    p = props(doc)
    containers = tuple(
        ReplicaContainerInfo(
            name=str(c.get("name", "")),
            running_state=c.get("runningState"),
            ready=c.get("ready"),
            restart_count=c.get("restartCount"),
            details=_nonempty(c.get("runningStateDetails")),
            exec_endpoint=_nonempty(c.get("execEndpoint")),
            log_stream_endpoint=_nonempty(c.get("logStreamEndpoint")),
        )
        for c in (p.get("containers") or [])
        if isinstance(c, Mapping)
    )
    return ReplicaInfo(
        name=str(doc.get("name", "")),
        running_state=p.get("runningState"),
        containers=containers,
        details=_nonempty(p.get("runningStateDetails")),
    )


def _exit_codes(p: Mapping[str, Any]) -> tuple[int, ...]:
    """Containers' exit codes from properties.detailedStatus.replicas[].containers[].code (SDK 5.1).

    Only an ended execution's codes are exit codes: while it runs Azure answers -1 for each container,
    and a read that races the end would otherwise pass that off as the tester's exit code.
    """
    if p.get("status") not in FINAL_EXECUTION_STATES:
        return ()
    detailed = p.get("detailedStatus")
    codes: list[int] = []
    replicas = detailed.get("replicas") if isinstance(detailed, Mapping) else None
    for replica in replicas if isinstance(replicas, list) else []:
        containers = replica.get("containers") if isinstance(replica, Mapping) else None
        for container in containers if isinstance(containers, list) else []:
            code = container.get("code") if isinstance(container, Mapping) else None
            if isinstance(code, int) and not isinstance(code, bool):
                codes.append(code)
    return tuple(codes)


def execution_info(obj: Any) -> ExecutionInfo:
    doc = as_json(obj)
    p = props(doc)
    return ExecutionInfo(
        name=str(doc.get("name", "")),
        status=p.get("status"),
        start_time=_nonempty(p.get("startTime")),
        end_time=_nonempty(p.get("endTime")),
        exit_codes=_exit_codes(p),
        reason=_nonempty(p.get("reason")),
        message=_nonempty(p.get("message")),
        env=_template_env(p),
        states=_states(p),
    )


def _template_env(p: Mapping[str, Any]) -> dict[str, str]:
    """The first container's plain env values of an execution's own template."""
    template = p.get("template")
    containers = template.get("containers") if isinstance(template, Mapping) else None
    first = containers[0] if isinstance(containers, list) and containers else None
    env = first.get("env") if isinstance(first, Mapping) else None
    entries = env if isinstance(env, list) else []
    return {
        str(e["name"]): str(e["value"])
        for e in entries
        if isinstance(e, Mapping) and e.get("name") and isinstance(e.get("value"), str)
    }


def _states(p: Mapping[str, Any]) -> tuple[str, ...]:
    """detailedStatus.replicas[].containers[].status: where each replica's container is now."""
    detailed = p.get("detailedStatus")
    replicas = detailed.get("replicas") if isinstance(detailed, Mapping) else None
    found: list[str] = []
    for replica in replicas if isinstance(replicas, list) else []:
        containers = replica.get("containers") if isinstance(replica, Mapping) else None
        for container in containers if isinstance(containers, list) else []:
            status = container.get("status") if isinstance(container, Mapping) else None
            if isinstance(status, str) and status:
                found.append(status)
    return tuple(found)


# ---- calls -----------------------------------------------------------------------------------

READ_AFTER_CREATE_ATTEMPTS = 4


def _is_404(exc: BaseException) -> bool:
    from azure.core.exceptions import HttpResponseError

    return isinstance(exc, HttpResponseError) and exc.status_code == 404


def result_or_read(poller: Any, kind: str, name: str, get: Callable[[], Any], *, pause: float = 0.5) -> Any:
    """The created resource. ARM accepted the PUT (`begin_*` returned), so a 404 from the operation's
    final read is its eventual consistency, not a missing resource: read it again for a few seconds.
    Still 404 after that is an infrastructure error, and the PUT is not sent again: a teardown that
    deleted the resource meanwhile must not see it made a second time."""
    try:
        return poller.result()
    except Exception as exc:
        if not _is_404(exc):
            raise
    return read_created(kind, name, get, pause=pause, first_now=False)


def read_created(
    kind: str, name: str, get: Callable[[], T], *, pause: float = 0.5, first_now: bool = True
) -> T:
    """`get()` of something ARM has just accepted the create of: a 404 is its eventual consistency
    (read again for a few seconds), and still 404 after that is InfraError `NotFoundAfterCreate`
    (exit 7), never "not found" as bad input: things were created."""
    for attempt in range(0 if first_now else 1, READ_AFTER_CREATE_ATTEMPTS + 1):
        if attempt:
            time.sleep(pause * attempt)
        try:
            return get()
        except Exception as exc:
            if not _is_404(exc) and not isinstance(exc, NotFound):
                raise
    waited = pause * sum(range(1, READ_AFTER_CREATE_ATTEMPTS + 1))
    raise InfraError(
        f"create {kind} {name}: ARM accepted it but still answers 404 when it is read "
        f"({READ_AFTER_CREATE_ATTEMPTS + 1} reads over {waited:.0f} s)",
        code="NotFoundAfterCreate",
    )


def _create(kind: str, operations: Any, rg: str, name: str, body: Any, to_info: Callable[[Any, str], T]) -> T:
    """PUT a body built here and return the resource as a record: an environment, app or job."""

    def put() -> T:  # a PUT is idempotent: an unreadable answer is sent again
        poller = operations.begin_create_or_update(rg, name, body)
        return to_info(result_or_read(poller, kind, name, lambda: operations.get(rg, name)), rg)

    return retrying(f"create {kind}", name, put)


def create_environment(clients: Clients, spec: EnvSpec) -> EnvInfo:
    from azure.mgmt.appcontainers.models import ManagedEnvironment

    body = ManagedEnvironment(environment_body(spec))
    return _create(
        "environment", clients.apps.managed_environments, spec.resource_group, spec.name, body, env_info
    )


def get_environment(clients: Clients, rg: str, name: str) -> EnvInfo | None:
    found = or_none("read environment", name, lambda: clients.apps.managed_environments.get(rg, name))
    return None if found is None else env_info(found, rg)


def create_app(clients: Clients, spec: AppSpec) -> AppInfo:
    from azure.mgmt.appcontainers.models import ContainerApp

    body = ContainerApp(app_body(spec))
    return _create(
        "container app", clients.apps.container_apps, spec.resource_group, spec.name, body, app_info
    )


def get_app(clients: Clients, rg: str, name: str) -> AppInfo | None:
    found = or_none("read container app", name, lambda: clients.apps.container_apps.get(rg, name))
    return None if found is None else app_info(found, rg)


def scale_app(clients: Clients, rg: str, name: str, min_replicas: int, max_replicas: int) -> AppInfo:
    """PATCH template.scale alone (ContainerApps_Update): nothing read from the server is sent back."""
    from azure.mgmt.appcontainers.models import ContainerApp

    body = ContainerApp(
        {"properties": {"template": {"scale": {"minReplicas": min_replicas, "maxReplicas": max_replicas}}}}
    )
    with translate_errors("scale container app", name):
        clients.apps.container_apps.begin_update(rg, name, body).result()
    found = get_app(clients, rg, name)
    if found is None:
        raise NotFound(f"container app {name} is gone after its update", code="ResourceNotFound")
    return found


def list_apps(clients: Clients, rg: str) -> list[AppInfo]:
    return retrying(
        "list container apps in",
        rg,
        lambda: [app_info(a, rg) for a in clients.apps.container_apps.list_by_resource_group(rg)],
    )


def list_jobs(clients: Clients, rg: str) -> list[JobInfo]:
    return retrying(
        "list jobs in", rg, lambda: [job_info(j, rg) for j in clients.apps.jobs.list_by_resource_group(rg)]
    )


def _refuse_unmanaged(kind: str, name: str, tags: Mapping[str, str]) -> None:
    """The last-moment tag check before a delete, in the layer that sends it (as for groups)."""
    if not is_managed(dict(tags)):
        raise PreflightRefused(
            f"refusing to delete {kind} {name}: it lacks the tag {TAG_MANAGED}=true", code="NotManaged"
        )


def delete_app(
    clients: Clients, rg: str, name: str, *, on_accepted: Callable[[], None] | None = None
) -> None:
    """Delete one container app acagpu made and wait for the LRO (the replica stops billing).
    `on_accepted` runs once ARM accepted the delete: the moment its replicas stop costing."""
    current = get_app(clients, rg, name)
    if current is None:
        return
    _refuse_unmanaged("container app", name, current.tags)
    with translate_errors("delete container app", name):
        poller = clients.apps.container_apps.begin_delete(rg, name, polling=_delete_polling(clients))
        if on_accepted is not None:
            on_accepted()
        poller.result(timeout=DELETE_WAIT_S)


def delete_job(
    clients: Clients, rg: str, name: str, *, on_accepted: Callable[[], None] | None = None
) -> None:
    current = get_job(clients, rg, name)
    if current is None:
        return
    _refuse_unmanaged("job", name, current.tags)
    with translate_errors("delete job", name):
        poller = clients.apps.jobs.begin_delete(rg, name, polling=_delete_polling(clients))
        if on_accepted is not None:
            on_accepted()
        poller.result(timeout=DELETE_WAIT_S)


def _delete_polling(clients: Clients) -> BackoffPolling:
    """A delete's operation is looked at soon, then less often (azure/polling.py): no fixed 5 s."""
    return BackoffPolling(clients.settings.polling_interval)


def stop_app(clients: Clients, rg: str, name: str) -> None:
    """The stable ContainerApps_Stop: no replica runs and nothing bills until start."""
    with translate_errors("stop container app", name):
        clients.apps.container_apps.begin_stop(rg, name).result()


def start_app(clients: Clients, rg: str, name: str) -> None:
    """Start is idempotent (a running app is started again as a no-op), so a start whose answer was
    lost mid-way (a connection reset after ARM took it) is sent again rather than called failed."""
    retrying("start container app", name, lambda: clients.apps.container_apps.begin_start(rg, name).result())


def list_revision_replicas(clients: Clients, rg: str, app: str, revision: str) -> list[ReplicaInfo]:
    found = or_none(
        "list replicas of",
        f"{app}/{revision}",
        lambda: clients.apps.container_apps_revision_replicas.list_replicas(rg, app, revision),
    )
    if found is None:
        return []
    values = getattr(found, "value", None)
    items = values if isinstance(values, list) else as_json(found).get("value") or []
    return [replica_info(r) for r in items]


def create_job(clients: Clients, spec: JobSpec) -> JobInfo:
    from azure.mgmt.appcontainers.models import Job

    body = Job(job_body(spec))
    return _create("job", clients.apps.jobs, spec.resource_group, spec.name, body, job_info)


def event_floor_patch(min_executions: int, replica_timeout_s: int) -> dict[str, Any]:
    """Jobs_Update's body that sets an Event job's warm floor (queue mode's `--warm`): the
    configuration's two required fields as they are, and minExecutions."""
    scale = {"minExecutions": min_executions}
    configuration = {"triggerType": "Event", "replicaTimeout": replica_timeout_s,
                     "eventTriggerConfig": {"scale": scale}}  # fmt: skip
    return {"properties": {"configuration": configuration}}


def set_event_floor(
    clients: Clients, rg: str, name: str, min_executions: int, replica_timeout_s: int
) -> None:
    """PATCH the Event job's minExecutions; nothing read from the server is sent back. That ARM
    merges a partial configuration (the rules and the rest kept) is UNCONFIRMED (docs/emulator.md)."""
    from azure.mgmt.appcontainers.models import JobPatchProperties

    body = JobPatchProperties(event_floor_patch(min_executions, replica_timeout_s))
    with translate_errors("set the warm floor of job", name):
        clients.apps.jobs.begin_update(rg, name, body).result()


def get_job(clients: Clients, rg: str, name: str) -> JobInfo | None:
    found = or_none("read job", name, lambda: clients.apps.jobs.get(rg, name))
    return None if found is None else job_info(found, rg)


def get_execution(clients: Clients, rg: str, job: str, execution: str) -> ExecutionInfo:
    return retrying(
        "read job execution",
        f"{job}/{execution}",
        lambda: execution_info(clients.apps.job_execution(rg, job, execution)),
    )


def list_executions(clients: Clients, rg: str, job: str) -> list[ExecutionInfo]:
    """Newest first (by start time), so [0] is the latest execution."""
    items = retrying(
        "list executions of",
        job,
        lambda: [execution_info(e) for e in clients.apps.jobs_executions.list(rg, job)],
    )
    return sorted(items, key=lambda e: e.start_time or "", reverse=True)


# ---- raw REST through the authenticated pipeline ---------------------------------------------


def send(
    clients: Clients,
    method: str,
    url: str,
    action: str,
    target: str,
    *,
    json_body: Any = None,
    once: bool = False,
) -> tuple[int, Any, Mapping[str, str]]:
    """(status, parsed JSON body or None, headers); ARM errors raised as aca_gpu errors.

    `once`: a request that is not safe to repeat (Jobs_Start): azure-core's RetryPolicy resends a
    POST after 500/503/504 (and any answer with Retry-After), although ARM may have done the work;
    with no status retries the caller hears the first failure and decides (it never resends a
    POST after a lost connection either)."""
    from azure.core.rest import HttpRequest

    request = HttpRequest(method, url) if json_body is None else HttpRequest(method, url, json=json_body)
    options: dict[str, Any] = {"retry_status": 0} if once else {}
    with translate_errors(action, target):
        response = clients.apps.send_request(request, **options)
        text = response.text() if callable(getattr(response, "text", None)) else str(response.text)
    status = int(response.status_code)
    if status >= 400:
        code, message = arm_error_fields(text)
        raise make_error(action, target, code, status, message)
    body: Any = None
    if text and text.strip():
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return status, body, response.headers


def _token_of(obj: Any, what: str) -> str:
    doc = as_json(obj)
    token = props(doc).get("token") or doc.get("token")
    if not token:
        raise CloudError(f"no data-plane token in the answer for {what}", code="NoToken")
    return str(token)


def app_token(clients: Clients, rg: str, app: str) -> str:
    # getAuthToken is a POST that only issues a token: safe to send again
    return retrying(
        "get access token for app",
        app,
        lambda: _token_of(clients.apps.container_apps.get_auth_token(rg, app), app),
    )


def environment_token(clients: Clients, rg: str, env: str) -> str:
    return retrying(
        "get access token for environment",
        env,
        lambda: _token_of(clients.apps.managed_environments.get_auth_token(rg, env), env),
    )


def _execution_name(body: Any) -> str | None:
    if isinstance(body, dict):
        name = body.get("name")
        if name:
            return str(name)
        ident = body.get("id")
        if ident:
            return str(ident).rstrip("/").rsplit("/", 1)[-1]
    return None


def execution_template(containers: Sequence[ContainerDef]) -> dict[str, Any]:
    """A `JobExecutionTemplate` (Jobs_Start's body): this execution's containers, not the job's."""
    return {"containers": [container_body(c) for c in containers]}


def start_job(
    clients: Clients,
    rg: str,
    job: str,
    *,
    template: Sequence[ContainerDef] | None = None,
    timeout: float = JOB_START_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Start a manual job; the execution name comes from the 200 body or from the 202's Location poll.

    With `template`, this execution runs those containers (image, command, env) instead of the job's
    own: one job, a different workload per start, no PUT (Jobs_Start's JobExecutionTemplate).

    The POST is sent again only when it provably started nothing (azure-core never resends it:
    `send(once=True)`): after a failure the executions are listed again, and a new one means the
    start did happen (no second GPU bill). A 429 is ARM refusing the rate: sent again after its
    Retry-After (the rate gate holds it) without using up a try, for as long as a fan-out's start.
    """
    version = api_versions.working(api_versions.STABLE)
    url = f"{app_path(clients, rg)}/jobs/{_q(job)}/start?api-version={version}"
    before = {e.name for e in list_executions(clients, rg, job)}
    attempt, patience_ends = 0, clock() + THROTTLED_PATIENCE_S
    while attempt < START_ATTEMPTS:
        attempt += 1
        try:
            body_out = execution_template(template) if template else None
            status, body, headers = send(
                clients, "POST", url, "start job", job, json_body=body_out, once=True
            )
            break
        except InfraError as exc:
            if is_throttled(exc) and clock() < patience_ends:
                attempt -= 1
                sleep(max(0.05, clients.settings.polling_interval))
                continue
            started = [e.name for e in list_executions(clients, rg, job) if e.name not in before]
            if started:
                return started[0]
            if attempt == START_ATTEMPTS:
                raise
            sleep(max(0.05, clients.settings.polling_interval) * attempt)
    name = _execution_name(body)
    if name:
        return name
    location = headers.get("Location") or headers.get("location") or headers.get("Azure-AsyncOperation")
    deadline = clock() + timeout
    interval = max(0.05, clients.settings.polling_interval)
    while status == 202 and location:
        if clock() >= deadline:
            raise WaitTimedOut(f"job {job} start not confirmed after {timeout:.0f}s", code="JobStartTimeout")
        sleep(_retry_after(headers, interval))
        status, body, headers = send(clients, "GET", location, "start job", job)
        name = _execution_name(body) or _execution_name((body or {}).get("properties") if body else None)
        if name:
            return name
        location = headers.get("Location") or headers.get("location") or location
    # the answer carried no name: the newest execution that was not there before is ours
    fresh = [e.name for e in list_executions(clients, rg, job) if e.name not in before]
    if fresh:
        return fresh[0]
    raise CloudError(f"job {job} started but no execution name came back", code="NoExecutionName")


def _retry_after(headers: Mapping[str, str], default: float) -> float:
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(default, float(value)) if value else default
    except ValueError:
        return default
