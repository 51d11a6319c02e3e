"""Microsoft.App routes. Every one needs the provider registered in the subscription."""

from __future__ import annotations

from typing import Any

from aca_gpu.emulator.context import Handler, Route
from aca_gpu.emulator.providers.app import models, storages
from aca_gpu.emulator.providers.app import responses as r
from aca_gpu.emulator.providers.authorization import scoped

NS = "Microsoft.App"
SUB = "/subscriptions/{sub}/providers/Microsoft.App"
RGP = "/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.App"
LOC = SUB + "/locations/{location}"
ENV = RGP + "/managedEnvironments/{name}"
APP = RGP + "/containerApps/{name}"
JOB = RGP + "/jobs/{name}"
JOB_ASSIGNMENTS = JOB + "/providers/Microsoft.Authorization/roleAssignments"


def _job_scope(ctx: Any, p: dict[str, str]) -> str:
    """A job's id from the path alone (an assignment at its scope outlives it)."""
    return f"/subscriptions/{ctx.subscription}/resourceGroups/{p['rg']}/providers/{NS}/jobs/{p['name']}"


# a job's role on itself (queue mode's warm floor, dropped by its own worker: docs/queue.md)
_JOB_ROLES = scoped.handlers(_job_scope, lambda ctx, p: models.get_job(ctx, p["rg"], p["name"]))


def _routes() -> list[Route]:
    table: list[tuple[str, str, Handler]] = [
        ("GET", LOC + "/availableManagedEnvironmentsWorkloadProfileTypes", r.available_workload_profiles_get),
        ("GET", LOC + "/usages", r.usages_list),
        ("GET", SUB + "/managedEnvironments", r.managed_environments_list),
        ("GET", RGP + "/managedEnvironments", r.managed_environments_list),
        ("PUT", ENV, r.managed_environments_create_or_update),
        ("GET", ENV, r.managed_environments_get),
        ("PATCH", ENV, r.managed_environments_update),
        ("DELETE", ENV, r.managed_environments_delete),
        ("POST", ENV + "/getAuthToken", r.managed_environments_get_auth_token),
        ("GET", ENV + "/usages", r.managed_environment_usages_list),
        ("GET", ENV + "/storages", storages.storages_list),
        ("GET", ENV + "/storages/{storage}", storages.storages_get),
        ("PUT", ENV + "/storages/{storage}", storages.storages_create_or_update),
        ("DELETE", ENV + "/storages/{storage}", storages.storages_delete),
        ("GET", ENV + "/workloadProfileStates", r.managed_environments_list_workload_profile_states),
        ("GET", SUB + "/containerApps", r.container_apps_list),
        ("GET", RGP + "/containerApps", r.container_apps_list),
        ("PUT", APP, r.container_apps_create_or_update),
        ("PATCH", APP, r.container_apps_update),
        ("GET", APP, r.container_apps_get),
        ("DELETE", APP, r.container_apps_delete),
        ("POST", APP + "/stop", r.container_apps_stop),
        ("POST", APP + "/start", r.container_apps_start),
        ("POST", APP + "/getAuthToken", r.container_apps_get_auth_token),
        ("POST", APP + "/listSecrets", r.container_apps_list_secrets),
        ("GET", APP + "/revisions", r.container_apps_revisions_list_revisions),
        ("GET", APP + "/revisions/{rev}", r.container_apps_revisions_get_revision),
        ("GET", APP + "/revisions/{rev}/replicas", r.container_apps_revision_replicas_list_replicas),
        ("GET", APP + "/revisions/{rev}/replicas/{replica}", r.container_apps_revision_replicas_get_replica),
        ("GET", SUB + "/jobs", r.jobs_list),
        ("GET", RGP + "/jobs", r.jobs_list),
        ("PUT", JOB, r.jobs_create_or_update),
        ("GET", JOB, r.jobs_get),
        ("PATCH", JOB, r.jobs_update),
        ("DELETE", JOB, r.jobs_delete),
        ("POST", JOB + "/start", r.jobs_start),
        ("POST", JOB + "/getAuthToken", r.jobs_get_auth_token),
        ("POST", JOB + "/listSecrets", r.jobs_list_secrets),
        ("GET", JOB + "/executions", r.jobs_executions_list),
        ("GET", JOB + "/executions/{execution}", r.job_execution),
        ("POST", JOB + "/executions/{execution}/stop", r.jobs_stop_execution),
        ("POST", JOB + "/stop/{execution}", r.jobs_stop_execution_cli),
        ("POST", JOB + "/stop", r.jobs_stop_multiple_executions),
        ("GET", JOB + "/executions/{execution}/replicas", r.job_execution_replicas_list),
    ]
    for kind in ("managedEnvironmentOperation", "containerappOperation", "containerappsjobOperation"):
        table.append(("GET", f"{LOC}/{kind}Statuses/{{op}}", r.operation_status))
        table.append(("GET", f"{LOC}/{kind}Results/{{op}}", r.operation_result))
    routes = [Route(method, pattern, handler, namespace=NS) for method, pattern, handler in table]
    create, get, delete, listing = _JOB_ROLES
    auth = "Microsoft.Authorization"
    routes += [
        Route("PUT", JOB_ASSIGNMENTS + "/{id}", create, namespace=auth),
        Route("GET", JOB_ASSIGNMENTS + "/{id}", get, namespace=auth),
        Route("DELETE", JOB_ASSIGNMENTS + "/{id}", delete, namespace=auth),
        Route("GET", JOB_ASSIGNMENTS, listing, namespace=auth),
    ]
    return routes


ROUTES = _routes()
