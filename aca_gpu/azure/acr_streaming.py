"""ACR artifact streaming over the registry's data plane (docs/staging.md, "Artifact streaming").

ACR converts an image into a streaming artifact (overlaybd) only when asked: a repository is
enabled with POST `/acr/v1/{repo}/_streaming`, one image's conversion is requested with POST
`/acr/v1/{repo}/_streaming/{digest}` (202 and an operation id), the operation is read at GET
`/acr/v1/{repo}/_operations/{id}` (NotStarted, Running, Succeeded, Failed, Canceled), and the
artifact, once made, is a referrer of the image (artifactType application/vnd.azure.artifact.streaming.v1).
These paths are what the Azure CLI's `az acr artifact-streaming` sends; no SDK method names them, so
they go through the azure-containerregistry client's own pipeline (its ACR token exchange, the
caller's Entra credential), and the tag's digest comes from the SDK itself.

Against the emulator the registry's host is not resolvable, so its data plane is reached under
`{ACAGPU_ARM_ENDPOINT}/_acr/{login server}` (the emulator's own path, docs/emulator.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aca_gpu.azure.acr import translated
from aca_gpu.azure.clients import Clients
from aca_gpu.errors import CloudError, InfraError, WaitTimedOut

ACR_AUDIENCE = "https://containerregistry.azure.net"
STREAMING_ARTIFACT_TYPE = "application/vnd.azure.artifact.streaming.v1"
CONVERSION = {"conversionFormat": "overlaybd", "conversionVersion": "v1"}
ONGOING = frozenset({"NotStarted", "Running"})
POLL_S = 5.0  # the Azure CLI polls every 5 s (and slower while nothing changes)


@dataclass(frozen=True)
class Conversion:
    """One conversion operation as ACR answers it."""

    id: str
    status: str
    progress: str = ""


def data_plane_endpoint(clients: Clients, login_server: str) -> str:
    arm = (clients.settings.arm_endpoint or "").rstrip("/")
    if arm:  # the emulator serves every registry's data plane under its own host
        return f"{arm}/_acr/{login_server}"
    return f"https://{login_server}"


def registry_client(clients: Clients, login_server: str) -> Any:
    from azure.containerregistry import ContainerRegistryClient

    from aca_gpu import recording

    kwargs: dict[str, Any] = {}
    if recording.active() is not None:  # --record: the registry's exchanges too (as acr.py does)
        from aca_gpu.azure.recorder import policy_options

        kwargs.update(policy_options())
    if clients.settings.ca_bundle:
        kwargs["connection_verify"] = clients.settings.ca_bundle
    return ContainerRegistryClient(
        data_plane_endpoint(clients, login_server), clients.credential, audience=ACR_AUDIENCE, **kwargs
    )


def _translated(what: str) -> AbstractContextManager[None]:
    return translated(what, hint="run `az login`")


def _send(client: Any, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    from azure.core.rest import HttpRequest

    request = HttpRequest(method, path, json=body) if body is not None else HttpRequest(method, path)
    response = client._client.send_request(request)  # the SDK's pipeline: its ACR token exchange
    if response.status_code == 404:
        return 404, None
    response.raise_for_status()
    return response.status_code, response.json() if response.content else {}


def _repo(repository: str) -> str:
    return quote(repository, safe="/")


def tag_digest(client: Any, repository: str, tag: str) -> str:
    with _translated(f"tag {repository}:{tag}"):
        return str(client.get_tag_properties(repository, tag).digest)


def enable_repository(client: Any, repository: str) -> None:
    """Streaming on for the repository (`convertPushedImages`: what is pushed later converts too)."""
    with _translated(f"artifact streaming for {repository}"):
        _send(
            client,
            "POST",
            f"/acr/v1/{_repo(repository)}/_streaming",
            {"convertPushedImages": True, **CONVERSION},
        )


def artifact_exists(client: Any, repository: str, digest: str) -> bool:
    """Whether the image already has a streaming artifact (a referrer of that type)."""
    path = (
        f"/v2/{_repo(repository)}/referrers/{digest}?artifactType={quote(STREAMING_ARTIFACT_TYPE, safe='')}"
    )
    with _translated(f"referrers of {repository}@{digest}"):
        status, doc = _send(client, "GET", path)
    manifests = (doc or {}).get("manifests") or []
    return status == 200 and any(m.get("artifactType") == STREAMING_ARTIFACT_TYPE for m in manifests)


def _conversion(doc: dict[str, Any]) -> Conversion:
    return Conversion(str(doc.get("id") or ""), str(doc.get("status") or ""), str(doc.get("progress") or ""))


def request_conversion(client: Any, repository: str, digest: str) -> Conversion:
    """The image's conversion: one already under way is followed rather than requested again."""
    path = f"/acr/v1/{_repo(repository)}/_streaming/{digest}"
    with _translated(f"the streaming conversion of {repository}@{digest}"):
        status, last = _send(client, "GET", path)
        if status == 200 and last and str(last.get("status")) in ONGOING:
            return _conversion(last)
        _, doc = _send(client, "POST", path, dict(CONVERSION))
    return _conversion(doc or {})


def read_conversion(client: Any, repository: str, operation: str) -> Conversion:
    with _translated(f"streaming operation {operation}"):
        status, doc = _send(client, "GET", f"/acr/v1/{_repo(repository)}/_operations/{operation}")
    if status == 404 or doc is None:
        raise CloudError(f"streaming operation {operation} of {repository} is gone")
    return _conversion(doc)


def wait_conversion(
    client: Any,
    repository: str,
    first: Conversion,
    deadline_s: float,
    on_status: Callable[[Conversion], None],
    *,
    poll_s: float = POLL_S,
) -> Conversion:
    """Read the operation until it ends; WaitTimedOut past the deadline, InfraError when it fails."""
    ends = time.monotonic() + deadline_s
    current = first
    on_status(current)
    while current.status in ONGOING or not current.status:
        if time.monotonic() >= ends:
            raise WaitTimedOut(
                f"the streaming conversion of {repository} was still {current.status or 'pending'} "
                f"after {deadline_s:.0f} s (operation {current.id})"
            )
        time.sleep(poll_s)
        current = read_conversion(client, repository, current.id)
        on_status(current)
    if current.status != "Succeeded":
        raise InfraError(
            f"the streaming conversion of {repository} ended {current.status} (operation {current.id})"
        )
    return current
