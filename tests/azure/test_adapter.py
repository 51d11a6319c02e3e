"""AzureCloud over autospec'd SDK clients: request bodies, response shapes from real recordings, guards."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.core.rest import HttpRequest
from azure.mgmt.appcontainers import models as m
from azure.mgmt.resource.resources import models as rm

from aca_gpu.azure import dataplane
from aca_gpu.azure.api_versions import PREVIEW
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.errors import CloudError, PreflightRefused, WaitTimedOut
from aca_gpu.models import AppSpec, ContainerDef, EnvSpec, JobSpec

from .conftest import SUB

PREVIEW_API_VERSION = PREVIEW[0]  # the process has seen no refusal: the newest preview first
RG = "rg-acagpu-abc123"
TAGS = {"acagpu:managed": "true", "acagpu:run-id": "abc123"}
ENV_ID = (
    f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.App/managedEnvironments/cae-acagpu-abc123"
)
CUDA = ContainerDef(
    name="explorer",
    image="nvidia/cuda:12.1.1-runtime-ubuntu22.04",
    cpu=8.0,
    memory="56Gi",
    command=("sleep",),
    args=("infinity",),
)

# Source: Azure CLI recording test_containerapp_exec.yaml, GET .../revisions/{rev}/replicas (api 2023-05-01)
APP = "containerapp-e2e000002"
REV = "containerapp-e2e000002--znbtoy3"
REPLICA = f"{REV}-c7c975bf8-v5v6d"
BASE = (
    f"eastus.azurecontainerapps.dev/subscriptions/{SUB}/resourceGroups/clitest.rg000001/containerApps/{APP}"
)
REPLICAS_BODY = {
    "value": [
        {
            "id": f"/subscriptions/{SUB}/resourceGroups/clitest.rg000001/providers/Microsoft.App"
            f"/containerApps/{APP}/revisions/{REV}/replicas/{REPLICA}",
            "name": REPLICA,
            "type": "Microsoft.App/containerapps/revisions/replicas",
            "properties": {
                "createdTime": "2024-04-16T09:42:21Z",
                "runningState": "Running",
                "runningStateDetails": "",
                "containers": [
                    {
                        "name": APP,
                        "containerId": "containerd://a4b9f0724cfe4b6d86c7233fdc56af5e",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "runningState": "Running",
                        "runningStateDetails": "Container started at: 4/16/2024 9:42:24 AM.",
                        "logStreamEndpoint": f"https://{BASE}/revisions/{REV}/replicas/{REPLICA}/containers/{APP}/logstream",
                        "execEndpoint": f"wss://{BASE}/revisions/{REV}/replicas/{REPLICA}/containers/{APP}/exec",
                    }
                ],
                "initContainers": [],
            },
        }
    ]
}


class Poller:
    def __init__(self, result: Any = None) -> None:
        self._result = result

    def result(self, timeout: float | None = None) -> Any:
        return self._result


class RawResponse:
    def __init__(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.status_code = status
        self._text = "" if body is None else json.dumps(body)
        self.headers = headers or {}

    def text(self) -> str:
        return self._text


def sent_body(call_args: Any) -> dict[str, Any]:
    body = call_args.args[-1]
    return body.as_dict() if hasattr(body, "as_dict") else dict(body)


def cloud_of(clients: Clients) -> AzureCloud:
    return AzureCloud(clients, rg_delete_timeout=5, sleep=lambda s: None)


# ---- request bodies ------------------------------------------------------------------------------


def test_environment_consumption_gpu_has_no_counts(clients: Clients) -> None:
    ops = clients.apps.managed_environments
    ops.begin_create_or_update.return_value = Poller(
        m.ManagedEnvironment(
            {
                "id": ENV_ID,
                "name": "cae-acagpu-abc123",
                "location": "eastus",
                "properties": {"provisioningState": "Succeeded"},
            }
        )
    )
    spec = EnvSpec(
        RG, "cae-acagpu-abc123", "eastus", TAGS, "gpu", "Consumption-GPU-NC8as-T4", dedicated_counts=(1, 2)
    )
    info = cloud_of(clients).create_environment(spec)
    body = sent_body(ops.begin_create_or_update.call_args)
    assert ops.begin_create_or_update.call_args.args[:2] == (RG, "cae-acagpu-abc123")
    assert body["tags"] == TAGS and body["location"] == "eastus"
    assert body["properties"]["workloadProfiles"] == [
        {"name": "Consumption", "workloadProfileType": "Consumption"},
        {"name": "gpu", "workloadProfileType": "Consumption-GPU-NC8as-T4"},
    ]
    assert info.id == ENV_ID and info.provisioning_state == "Succeeded" and info.resource_group == RG


@pytest.mark.parametrize(("counts", "expected"), [(None, (1, 1)), ((0, 3), (0, 3))])
def test_environment_dedicated_gpu_gets_counts(
    clients: Clients, counts: tuple[int, int] | None, expected: tuple[int, int]
) -> None:
    ops = clients.apps.managed_environments
    ops.begin_create_or_update.return_value = Poller(m.ManagedEnvironment({"id": ENV_ID, "name": "e"}))
    cloud_of(clients).create_environment(EnvSpec(RG, "e", "westus3", TAGS, "gpu", "NC24-A100", counts))
    gpu = sent_body(ops.begin_create_or_update.call_args)["properties"]["workloadProfiles"][1]
    assert (gpu["minimumCount"], gpu["maximumCount"]) == expected


def test_explorer_app_body(clients: Clients) -> None:
    ops = clients.apps.container_apps
    ops.begin_create_or_update.return_value = Poller(
        m.ContainerApp(
            {
                "id": "/x",
                "name": "cuda-explorer-abc123",
                "properties": {
                    "provisioningState": "Succeeded",
                    "runningStatus": "Running",
                    "latestRevisionName": "",
                    "template": {"scale": {"minReplicas": 1, "maxReplicas": 1}},
                },
            }
        )
    )
    spec = AppSpec(RG, "cuda-explorer-abc123", "eastus", ENV_ID, "gpu", CUDA, TAGS)
    info = cloud_of(clients).create_app(spec)
    body = sent_body(ops.begin_create_or_update.call_args)
    p = body["properties"]
    assert body["tags"] == TAGS
    assert p["environmentId"] == ENV_ID and p["workloadProfileName"] == "gpu"
    assert p["template"]["scale"] == {"minReplicas": 1, "maxReplicas": 1}
    assert p["template"]["containers"] == [
        {
            "name": "explorer",
            "image": CUDA.image,
            "resources": {"cpu": 8.0, "memory": "56Gi"},
            "command": ["sleep"],
            "args": ["infinity"],
        }
    ]
    assert info.latest_revision is None and info.min_replicas == 1 and info.running_status == "Running"


def test_tester_job_body(clients: Clients) -> None:
    ops = clients.apps.jobs
    ops.begin_create_or_update.return_value = Poller(m.Job({"id": "/j", "name": "gpu-tester-abc123"}))
    container = ContainerDef("tester", "img:1", 8.0, "56Gi", env={"ACAGPU_RUN": "abc123"})
    spec = JobSpec(RG, "gpu-tester-abc123", "eastus", ENV_ID, "gpu", container, TAGS, replica_timeout_s=900)
    cloud_of(clients).create_job(spec)
    p = sent_body(ops.begin_create_or_update.call_args)["properties"]
    assert p["workloadProfileName"] == "gpu"
    assert p["configuration"] == {
        "triggerType": "Manual",
        "replicaTimeout": 900,
        "replicaRetryLimit": 0,
        "manualTriggerConfig": {"replicaCompletionCount": 1, "parallelism": 1},
    }
    assert p["template"]["containers"][0]["env"] == [{"name": "ACAGPU_RUN", "value": "abc123"}]


def test_scale_app_patches_only_the_scale(clients: Clients) -> None:
    """Nothing read from the server travels back: the PATCH body is the scale and nothing else."""
    ops = clients.apps.container_apps
    ops.begin_update.return_value = Poller(None)
    ops.get.return_value = m.ContainerApp({"id": "/a", "name": "a", "properties": {}})
    cloud_of(clients).scale_app(RG, "a", 1, 1)
    assert sent_body(ops.begin_update.call_args) == {
        "properties": {"template": {"scale": {"minReplicas": 1, "maxReplicas": 1}}}
    }
    ops.begin_create_or_update.assert_not_called()


# ---- resource groups -----------------------------------------------------------------------------


def test_delete_refuses_untagged_group(clients: Clients) -> None:
    rgs = clients.resources.resource_groups
    rgs.get.return_value = rm.ResourceGroup({"name": "prod", "location": "eastus", "tags": {"team": "x"}})
    with pytest.raises(PreflightRefused, match="acagpu:managed"):
        cloud_of(clients).delete_resource_group("prod")
    rgs.begin_delete.assert_not_called()


def test_delete_waits_until_404(clients: Clients) -> None:
    rgs = clients.resources.resource_groups
    managed = rm.ResourceGroup({"name": RG, "location": "eastus", "tags": TAGS})
    rgs.get.side_effect = [managed, managed, ResourceNotFoundError("gone")]
    rgs.begin_delete.return_value = Poller()
    cloud_of(clients).delete_resource_group(RG)
    rgs.begin_delete.assert_called_once_with(RG)
    assert rgs.get.call_count == 3


def test_delete_missing_group_is_a_no_op(clients: Clients) -> None:
    clients.resources.resource_groups.get.side_effect = ResourceNotFoundError("gone")
    cloud_of(clients).delete_resource_group(RG)
    clients.resources.resource_groups.begin_delete.assert_not_called()


def test_create_and_list_groups_with_tags(clients: Clients) -> None:
    rgs = clients.resources.resource_groups
    rgs.create_or_update.return_value = rm.ResourceGroup(
        {"name": RG, "location": "eastus", "tags": TAGS, "properties": {"provisioningState": "Succeeded"}}
    )
    info = cloud_of(clients).create_resource_group(RG, "eastus", TAGS)
    assert rgs.create_or_update.call_args.args == (RG, {"location": "eastus", "tags": TAGS})
    assert info.provisioning_state == "Succeeded"
    rgs.list.return_value = iter(
        [
            rm.ResourceGroup({"name": RG, "location": "eastus", "tags": TAGS}),
            rm.ResourceGroup({"name": "other", "location": "eastus", "tags": {}}),
        ]
    )
    found = cloud_of(clients).list_resource_groups("acagpu:managed", "true")
    assert rgs.list.call_args.kwargs == {"filter": "tagName eq 'acagpu:managed' and tagValue eq 'true'"}
    assert [g.name for g in found] == [RG]


# ---- subscription level --------------------------------------------------------------------------


def test_provider_registration_polls_until_registered(clients: Clients) -> None:
    providers = clients.resources.providers
    providers.register.return_value = rm.Provider(
        {"namespace": "Microsoft.App", "registrationState": "Registering"}
    )
    providers.get.side_effect = [
        rm.Provider({"registrationState": "Registering"}),
        rm.Provider({"registrationState": "Registered"}),
    ]
    cloud = cloud_of(clients)
    cloud.register_provider("Microsoft.App", timeout=60)
    assert providers.get.call_count == 2
    providers.get.side_effect = None
    providers.get.return_value = rm.Provider({"registrationState": "NotRegistered"})
    assert cloud.provider_registered("Microsoft.App") is False


def test_profiles_and_usages_from_recorded_shapes(clients: Clients) -> None:
    # Source: test_containerapp_env_workload_profiles_list_supported.yaml, test_containerapp_env_usages.yaml
    clients.apps.available_workload_profiles.get.return_value = iter(
        [
            m.AvailableWorkloadProfile(
                {
                    "location": "northeurope",
                    "name": "NC24-A100",
                    "properties": {
                        "displayName": "Dedicated-NC24-A100",
                        "category": "GPU-NC-A100",
                        "cores": 24,
                        "memoryGiB": 220,
                        "gpus": 1,
                    },
                }
            ),
            m.AvailableWorkloadProfile(
                {"name": "D4", "properties": {"category": "GeneralPurpose", "cores": 4, "memoryGiB": 16}}
            ),
        ]
    )
    offers = cloud_of(clients).available_profiles("northeurope")
    assert [(o.name, o.gpus, o.cores, o.memory_gib) for o in offers] == [
        ("NC24-A100", 1, 24, 220),
        ("D4", None, 4, 16),
    ]
    clients.apps.usages.list.return_value = iter(
        [
            m.Usage(
                {
                    "name": {
                        "value": "ManagedEnvironmentCount",
                        "localizedValue": "Managed Environment Count",
                    },
                    "usage": 5,
                    "currentValue": 5,
                    "limit": 40,
                }
            )
        ]
    )
    (usage,) = cloud_of(clients).usages("eastus")
    assert (usage.name, usage.current, usage.limit) == ("ManagedEnvironmentCount", 5.0, 40.0)


# ---- replicas, jobs, preview endpoints -----------------------------------------------------------


def _app_with_revision(clients: Clients) -> None:
    clients.apps.container_apps.get.return_value = m.ContainerApp(
        {
            "id": "/a",
            "name": APP,
            "properties": {"latestRevisionName": REV, "eventStreamEndpoint": f"https://{BASE}/eventstream"},
        }
    )


def test_app_replicas_from_recording(clients: Clients) -> None:
    _app_with_revision(clients)
    clients.apps.container_apps_revision_replicas.list_replicas.return_value = m.ReplicaCollection(
        REPLICAS_BODY
    )
    (replica,) = cloud_of(clients).list_app_replicas("clitest.rg000001", APP)
    clients.apps.container_apps_revision_replicas.list_replicas.assert_called_once_with(
        "clitest.rg000001", APP, REV
    )
    (container,) = replica.containers
    assert replica.name == REPLICA and replica.running_state == "Running"
    assert container.exec_endpoint and container.exec_endpoint.startswith(
        "wss://eastus.azurecontainerapps.dev/"
    )
    assert container.log_stream_endpoint and container.log_stream_endpoint.endswith("/logstream")
    assert container.ready is True and container.restart_count == 0


def test_start_job_synchronous_200(clients: Clients) -> None:
    # Source: test_containerapp_job_executionstest_e2e.yaml, POST .../jobs/{job}/start → 200 {id, name}
    clients.apps.send_request.return_value = RawResponse(
        200,
        {
            "id": f"/subscriptions/{SUB}/resourceGroups/clitest.rg000001/providers/Microsoft.App"
            "/jobs/job2000002/executions/job2000002-4gl5y6d",
            "name": "job2000002-4gl5y6d",
        },
    )
    assert cloud_of(clients).start_job("clitest.rg000001", "job2000002") == "job2000002-4gl5y6d"
    request = clients.apps.send_request.call_args.args[0]
    assert isinstance(request, HttpRequest) and request.method == "POST"
    assert request.url.startswith(
        f"/subscriptions/{SUB}/resourceGroups/clitest.rg000001/providers/Microsoft.App/jobs/job2000002/start?api-version="
    )


def test_start_job_202_polls_location(clients: Clients) -> None:
    location = "https://management.azure.com/subscriptions/s/providers/Microsoft.App/locations/eastus/op/1"
    clients.apps.send_request.side_effect = [
        RawResponse(202, None, {"Location": location}),
        RawResponse(202, None, {"Location": location}),
        RawResponse(
            200, {"id": ".../executions/gpu-tester-abc123-x1y2z3", "name": "gpu-tester-abc123-x1y2z3"}
        ),
    ]
    assert cloud_of(clients).start_job(RG, "gpu-tester-abc123") == "gpu-tester-abc123-x1y2z3"
    assert clients.apps.send_request.call_args.args[0].url == location


def test_start_job_without_name_falls_back_to_newest_execution(clients: Clients) -> None:
    clients.apps.send_request.side_effect = [
        RawResponse(202, None, {}),
    ]
    old = m.JobExecution(
        {"name": "old", "properties": {"status": "Running", "startTime": "2024-08-17T10:00:00+00:00"}}
    )
    new = m.JobExecution(
        {"name": "new", "properties": {"status": "Running", "startTime": "2024-08-17T10:36:07+00:00"}}
    )
    # before the start only `old` exists; the nameless answer means the new execution is ours, even
    # when an older one is still running
    clients.apps.jobs_executions.list.side_effect = [iter([old]), iter([new, old])]
    assert cloud_of(clients).start_job(RG, "j") == "new"


def test_start_job_is_not_repeated_when_the_lost_answer_did_start_one(clients: Clients) -> None:
    from azure.core.exceptions import ServiceResponseError

    new = m.JobExecution(
        {"name": "new", "properties": {"status": "Running", "startTime": "2024-08-17T10:36:07+00:00"}}
    )
    clients.apps.send_request.side_effect = ServiceResponseError("Connection reset by peer")
    clients.apps.jobs_executions.list.side_effect = [iter([]), iter([new])]
    assert cloud_of(clients).start_job(RG, "j") == "new"
    assert clients.apps.send_request.call_count == 1  # provably started: never a second POST


def test_start_job_is_retried_when_provably_nothing_started(clients: Clients) -> None:
    from azure.core.exceptions import ServiceRequestError

    clients.apps.send_request.side_effect = [
        ServiceRequestError("Connection refused"),
        RawResponse(200, {"name": "exec-2", "id": "/x/executions/exec-2"}),
    ]
    clients.apps.jobs_executions.list.side_effect = [iter([]), iter([])]
    assert cloud_of(clients).start_job(RG, "j") == "exec-2"
    assert clients.apps.send_request.call_count == 2


def test_execution_replicas_and_job_token_use_preview_endpoints(clients: Clients) -> None:
    from aca_gpu.azure import api_versions

    api_versions.forget()  # another test in this process may have fallen back already
    clients.apps.send_request.side_effect = [
        RawResponse(200, REPLICAS_BODY),
        RawResponse(
            404, {"error": {"code": "ResourceNotFound", "message": "No replicas found for execution"}}
        ),
        RawResponse(200, {"properties": {"token": "capp-jwt", "expires": "2024-01-01T00:00:00Z"}}),
    ]
    cloud = cloud_of(clients)
    assert [r.name for r in cloud.list_execution_replicas(RG, "j", "j-abc")] == [REPLICA]
    url = clients.apps.send_request.call_args.args[0].url
    assert url.endswith(f"/jobs/j/executions/j-abc/replicas?api-version={PREVIEW_API_VERSION}")
    assert cloud.list_execution_replicas(RG, "j", "j-abc") == []
    from aca_gpu.azure.preview import job_token

    assert job_token(clients, RG, "j") == "capp-jwt"
    assert clients.apps.send_request.call_args.args[0].url.endswith(
        f"/jobs/j/getAuthToken?api-version={PREVIEW_API_VERSION}"
    )


def test_execution_status_mapping(clients: Clients) -> None:
    clients.apps.job_execution.return_value = m.JobExecution(
        {"name": "j-1", "properties": {"status": "Stopped", "startTime": "2024-08-17T10:36:09+00:00"}}
    )
    info = cloud_of(clients).get_execution(RG, "j", "j-1")
    assert info.status == "Stopped" and info.finished


def _execution_with_code(status: str, code: int) -> Any:
    replica = {"name": "j-1-abcde", "containers": [{"name": "tester", "code": code, "status": status}]}
    return m.JobExecution(
        {"name": "j-1", "properties": {"status": status, "detailedStatus": {"replicas": [replica]}}}
    )


def test_a_running_executions_container_code_is_no_exit_code(clients: Clients) -> None:
    # Azure answers code -1 for each container while the execution runs; only an ended one has codes
    clients.apps.job_execution.return_value = _execution_with_code("Running", -1)
    running = cloud_of(clients).get_execution(RG, "j", "j-1")
    assert running.exit_codes == () and not running.finished
    clients.apps.job_execution.return_value = _execution_with_code("Failed", 3)
    assert cloud_of(clients).get_execution(RG, "j", "j-1").exit_codes == (3,)


# ---- exec orchestration --------------------------------------------------------------------------


def test_exec_goes_through_sh_with_marker(clients: Clients, monkeypatch: pytest.MonkeyPatch) -> None:
    _app_with_revision(clients)
    clients.apps.container_apps_revision_replicas.list_replicas.return_value = m.ReplicaCollection(
        REPLICAS_BODY
    )
    clients.apps.container_apps.get_auth_token.return_value = m.ContainerAppAuthToken(
        {"location": "East US", "properties": {"token": "capp-jwt", "expires": "2024-04-16T10:42:43Z"}}
    )
    seen: dict[str, Any] = {}

    def fake_run_exec(endpoint: str, token: str, **kwargs: Any) -> dataplane.Transcript:
        seen.update(endpoint=endpoint, token=token, **kwargs)
        nonce = kwargs["nonce"]
        line = dataplane.command_line(["sh", "-c", "exit 3"], nonce)
        return dataplane.Transcript(stdout=f"# {line}\r\nexit\r\n__ACAGPU_EXIT_{nonce}__3\r\n", sent=True)

    monkeypatch.setattr(dataplane, "run_exec", fake_run_exec)
    result = cloud_of(clients).exec("clitest.rg000001", APP, ["sh", "-c", "exit 3"])
    assert result.exit_code == 3 and result.output == ""
    assert seen["command"] == "sh" and seen["token"] == "capp-jwt"
    assert seen["endpoint"].endswith(f"/containers/{APP}/exec")
    assert seen["stdin"] == dataplane.shell_script(["sh", "-c", "exit 3"], seen["nonce"])


def test_exec_error_frame_is_a_clear_error(clients: Clients, monkeypatch: pytest.MonkeyPatch) -> None:
    _app_with_revision(clients)
    clients.apps.container_apps_revision_replicas.list_replicas.return_value = m.ReplicaCollection(
        REPLICAS_BODY
    )
    clients.apps.container_apps.get_auth_token.return_value = m.ContainerAppAuthToken(
        {"properties": {"token": "t"}}
    )
    monkeypatch.setattr(
        dataplane,
        "run_exec",
        lambda *a, **k: dataplane.Transcript(
            errors=['{"Error":{"Code":"ClusterExecFailure","Message":"executable file not found"}}']
        ),
    )
    with pytest.raises(CloudError, match="ClusterExecFailure") as caught:
        cloud_of(clients).exec_raw("clitest.rg000001", APP, "ls -la")
    assert caught.value.code == "ClusterExecFailure"


def test_waiting_for_a_replica_has_a_deadline(clients: Clients) -> None:
    _app_with_revision(clients)
    waiting = json.loads(json.dumps(REPLICAS_BODY))
    container = waiting["value"][0]["properties"]["containers"][0]
    container.update(runningState="Waiting", runningStateDetails="AssigningReplica")
    clients.apps.container_apps_revision_replicas.list_replicas.return_value = m.ReplicaCollection(waiting)
    ticks = iter(range(0, 10_000, 10))
    cloud = AzureCloud(clients, sleep=lambda s: None, clock=lambda: next(ticks))
    with pytest.raises(WaitTimedOut, match="AssigningReplica"):
        cloud.exec("clitest.rg000001", APP, ["nvidia-smi"], timeout=60)
