"""The preview-only Microsoft.App calls, isolated: a job's data-plane token and an execution's replicas.

Neither is in the public Microsoft.App REST spec (azure-rest-api-specs); the Azure CLI calls them with
`2023-11-02-preview`. Each goes through `api_versions.preview_call`, which starts at the newest
preview this process has seen work (the pipeline policy falls back along `api_versions.PREVIEW`)
and turns "every preview version refused" into one clear error.
"""

from __future__ import annotations

from aca_gpu.azure.api_versions import preview_call
from aca_gpu.azure.app_records import replica_info
from aca_gpu.azure.apps import _token_of
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.job_executions import _q, app_path, send
from aca_gpu.azure.translate import retrying
from aca_gpu.errors import CloudError, InfraError, NotFound
from aca_gpu.models import ReplicaInfo


def job_token(clients: Clients, rg: str, job: str) -> str:
    def call(version: str) -> str:
        url = f"{app_path(clients, rg)}/jobs/{_q(job)}/getAuthToken?api-version={version}"

        def post() -> str:  # a POST that only issues a token: safe to send again
            _, body, _ = send(clients, "POST", url, "get access token for job", job)
            return _token_of(body, job)

        return retrying("get access token for job", job, post)

    return preview_call(f"get access token for job {job}", call)


def list_execution_replicas(clients: Clients, rg: str, job: str, execution: str) -> list[ReplicaInfo]:
    """Replicas of one execution (preview endpoint); empty once the execution's pod is cleaned up."""

    def call(version: str) -> object:
        path = f"{app_path(clients, rg)}/jobs/{_q(job)}/executions/{_q(execution)}/replicas"
        url = f"{path}?api-version={version}"
        _, body, _ = send(clients, "GET", url, "list replicas of execution", f"{job}/{execution}")
        return body

    try:
        body = preview_call(f"list replicas of execution {job}/{execution}", call)
    except NotFound:
        return []
    except (CloudError, InfraError) as exc:
        if "no replicas found" in exc.message.lower():
            return []
        raise
    items = body.get("value") if isinstance(body, dict) else None
    return [replica_info(r) for r in items or []]
