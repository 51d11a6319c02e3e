"""The ACR adapter: same `RegistrySource` contract, served by an autospec'd ContainerRegistryClient."""

from __future__ import annotations

import json
from unittest.mock import create_autospec

import pytest
from azure.containerregistry import ContainerRegistryClient
from azure.containerregistry._models import GetManifestResult
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError

from aca_gpu.azure.acr import AcrSource
from aca_gpu.errors import AuthError, CloudError, NotFound
from aca_gpu.registry.images import OCI_MANIFEST, inspect_image, sha256_digest
from aca_gpu.workflow.preflight import tags as tags_flow

CONFIG = json.dumps(
    {
        "os": "linux",
        "architecture": "amd64",
        "config": {"Env": ["CUDA_VERSION=12.6.3", "NVIDIA_REQUIRE_CUDA=cuda>=12.6"]},
    }
).encode()
MANIFEST = {
    "schemaVersion": 2,
    "mediaType": OCI_MANIFEST,
    "config": {"digest": sha256_digest(CONFIG), "size": len(CONFIG)},
    "layers": [],
}


class Tag:
    def __init__(self, name: str) -> None:
        self.name = name


def fake_client() -> ContainerRegistryClient:
    client = create_autospec(ContainerRegistryClient, instance=True)
    client.list_tag_properties.return_value = [
        Tag(t)
        for t in ("12.6.3-runtime-ubuntu22.04", "12.1.1-runtime-ubuntu22.04", "12.0.1-runtime-ubuntu22.04")
    ]
    client.get_manifest.return_value = GetManifestResult(
        manifest=MANIFEST, media_type=OCI_MANIFEST, digest="sha256:" + "a" * 64
    )
    client.download_blob.side_effect = lambda repo, digest: iter([CONFIG[:10], CONFIG[10:]])
    return client


def test_discovery_and_inspection_through_acr() -> None:
    client = fake_client()
    query = tags_flow.TagsQuery("myacr.azurecr.io/nvidia/cuda", since="12.1", inspect=True)
    result = tags_flow.discover(query, source_factory=lambda ref, q: AcrSource(client))
    assert result.names == ["12.6.3-runtime-ubuntu22.04", "12.1.1-runtime-ubuntu22.04"]
    assert result.registry == "myacr.azurecr.io"
    client.list_tag_properties.assert_called_once_with("nvidia/cuda")
    info = result.images["12.6.3-runtime-ubuntu22.04"]
    assert info.digest == "sha256:" + "a" * 64 and info.cuda_version == "12.6.3"


def test_blob_digest_is_checked() -> None:
    client = fake_client()
    client.download_blob.side_effect = lambda repo, digest: iter([b"tampered"])
    with pytest.raises(CloudError, match="does not match"):
        inspect_image(AcrSource(client), "nvidia/cuda", "12.6.3-runtime-ubuntu22.04")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [(ResourceNotFoundError("nope"), NotFound), (ClientAuthenticationError("denied"), AuthError)],
)
def test_sdk_errors_become_acagpu_errors(exc: Exception, expected: type[Exception]) -> None:
    client = fake_client()
    client.list_tag_properties.side_effect = exc
    with pytest.raises(expected):
        AcrSource(client).list_tags("nvidia/cuda")


def test_acr_hosts_get_the_acr_adapter() -> None:
    ref = tags_flow.resolve_repository(tags_flow.TagsQuery("nvidia/cuda", registry="myacr.azurecr.io"))
    source = tags_flow.default_source(ref, tags_flow.TagsQuery("nvidia/cuda"))
    assert isinstance(source, AcrSource)
    other = tags_flow.resolve_repository(tags_flow.TagsQuery("nvcr.io/nvidia/cuda"))
    assert not isinstance(tags_flow.default_source(other, tags_flow.TagsQuery("nvidia/cuda")), AcrSource)
