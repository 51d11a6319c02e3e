"""ACR as a `RegistrySource`: the azure-containerregistry client with an Entra credential.

ACR's token exchange (AAD token → ACR refresh token → access token) is what the SDK does well, so
`*.azurecr.io` goes through it rather than the plain OCI client. The workflow passes this adapter to
the registry layer, which never imports the Azure SDK itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from aca_gpu.errors import AuthError, CloudError, NotFound
from aca_gpu.registry.images import Manifest, sha256_digest

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential


PULL_HINT = "run `az login`, or grant AcrPull on the registry"


@contextmanager
def translated(
    what: str, *, hint: str = "run `az login`, or grant AcrPull on the registry"
) -> Iterator[None]:
    """The registry data plane's errors as acagpu's (every ACR call: manifests, tags, streaming)."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
        ServiceRequestError,
    )

    try:
        yield
    except ResourceNotFoundError as exc:
        raise NotFound(f"{what} not found in ACR") from exc
    except ClientAuthenticationError as exc:
        raise AuthError(f"ACR refused {what}: {exc.message}", hint=hint) from exc
    except (HttpResponseError, ServiceRequestError) as exc:
        raise CloudError(f"ACR failed on {what}: {exc.message}") from exc


class AcrSource:
    """List tags, fetch manifests and blobs of one ACR registry."""

    def __init__(self, client: Any) -> None:
        self._client = client  # azure.containerregistry.ContainerRegistryClient (or an autospec of it)

    @classmethod
    def for_registry(
        cls, login_server: str, credential: TokenCredential | None = None, **client_kwargs: Any
    ) -> AcrSource:
        from azure.containerregistry import ContainerRegistryClient

        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        from aca_gpu import recording

        if recording.active() is not None:  # --record: the registry's exchanges too
            from aca_gpu.azure.recorder import policy_options

            client_kwargs = {**policy_options(), **client_kwargs}
        return cls(ContainerRegistryClient(f"https://{login_server}", credential, **client_kwargs))

    def list_tags(self, repository: str) -> list[str]:
        with translated(f"repository {repository}"):
            return [str(props.name) for props in self._client.list_tag_properties(repository)]

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        with translated(f"manifest {repository}:{reference}"):
            result = self._client.get_manifest(repository, reference)
        # the SDK already checked the digest against the bytes; re-serialising would change them
        body = manifest_body(result)
        return Manifest(str(result.media_type or body.get("mediaType", "")), str(result.digest), body)

    def get_blob(self, repository: str, digest: str) -> bytes:
        with translated(f"blob {digest} in {repository}"):
            data = b"".join(_chunks(self._client.download_blob(repository, digest)))
        if sha256_digest(data) != digest:
            raise CloudError(f"blob {digest} in {repository} does not match its digest")
        return data


def _chunks(stream: Any) -> Iterator[bytes]:
    yield from stream


def manifest_body(result: Any) -> dict[str, Any]:
    """The manifest as a dict whether the SDK returned a mapping or raw bytes."""
    manifest = result.manifest
    if isinstance(manifest, bytes | bytearray):
        parsed: dict[str, Any] = json.loads(bytes(manifest))
        return parsed
    return dict(manifest)
