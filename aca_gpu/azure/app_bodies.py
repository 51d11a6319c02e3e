"""Request bodies for managed environments, container apps, jobs and job starts.

Bodies are REST-shaped dicts (wrapped in SDK models by the callers in apps.py), so what is sent is
visible in one place and tests compare it field by field; a body is always built here, never a
document read back from the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aca_gpu.models import AppSpec, ContainerDef, EnvSpec, EventTrigger, JobSpec, RegistryCred

CONSUMPTION = "Consumption"


def is_consumption_type(profile_type: str) -> bool:
    """Consumption and Consumption-GPU-* profiles take no min/max counts (ARM refuses them:
    WorkloadProfilePropertyNotSupported)."""
    return profile_type.lower().startswith(CONSUMPTION.lower())


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


def event_floor_patch(min_executions: int, replica_timeout_s: int) -> dict[str, Any]:
    """Jobs_Update's body that sets an Event job's warm floor (queue mode's `--warm`): the
    configuration's two required fields as they are, and minExecutions."""
    scale = {"minExecutions": min_executions}
    configuration = {"triggerType": "Event", "replicaTimeout": replica_timeout_s,
                     "eventTriggerConfig": {"scale": scale}}  # fmt: skip
    return {"properties": {"configuration": configuration}}


def execution_template(containers: Sequence[ContainerDef]) -> dict[str, Any]:
    """A `JobExecutionTemplate` (Jobs_Start's body): this execution's containers, not the job's."""
    return {"containers": [container_body(c) for c in containers]}
