"""Managed environments, container apps and jobs: create, read, list, scale, stop, start, delete.

Also an app's replicas and the ACA data-plane tokens. Every body sent is built in app_bodies.py
and wrapped in an SDK model here; every answer is read into a record by app_records.py. A job's
executions (start, read, list) live in job_executions.py, the preview-only calls in preview.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aca_gpu.azure.app_bodies import app_body, environment_body, event_floor_patch, job_body
from aca_gpu.azure.app_records import app_info, env_info, job_info, replica_info
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.polling import BackoffPolling
from aca_gpu.azure.resources import as_json, props
from aca_gpu.azure.translate import or_none, retrying, translate_errors
from aca_gpu.errors import CloudError, InfraError, NotFound, PreflightRefused
from aca_gpu.models import AppInfo, AppSpec, EnvInfo, EnvSpec, JobInfo, JobSpec, ReplicaInfo
from aca_gpu.naming import TAG_MANAGED, is_managed

T = TypeVar("T")

DELETE_WAIT_S = 600.0  # the caller verifies absence; a slower delete is reported, never waited forever
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


def environment_storages(clients: Clients, rg: str, environment: str) -> list[str]:
    """The names of an environment's storages (Azure Files shares its apps and jobs can mount)."""
    found = retrying(
        "list environment storages",
        environment,
        lambda: clients.apps.managed_environments_storages.list(rg, environment),
    )
    return [str(item.name) for item in (getattr(found, "value", None) or [])]


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
