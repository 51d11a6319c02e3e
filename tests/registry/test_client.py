"""The OCI client against a real registry (docker-registry on loopback, HTTPS, token auth)."""

from __future__ import annotations

import json
import math

import pytest

from aca_gpu.errors import AuthError, InfraError, NotFound
from aca_gpu.registry.client import RegistryClient
from aca_gpu.registry.images import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, inspect_image, pick_platform

REPO = "nvidia/cuda"


def client(registry, **kwargs) -> RegistryClient:  # type: ignore[no-untyped-def]
    return RegistryClient(registry.host, verify=registry.ca_bundle, **kwargs)


def test_lists_every_tag(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry, page_size=5) as c:
        tags = c.list_tags(REPO)
    assert sorted(tags) == sorted(registry.tags)


@pytest.mark.parametrize("page_size", [2, 3, 1000])
def test_follows_link_pagination(registry, page_size: int) -> None:  # type: ignore[no-untyped-def]
    """distribution 2.8 paginates the catalog with `Link: <...>; rel="next"` (tags from 3.0 on)."""
    with client(registry) as c:
        pages = list(c.iter_repository_pages(page_size))
    assert sorted(r for page in pages for r in page) == sorted(registry.repositories)
    assert len(pages) >= math.ceil(len(registry.repositories) / page_size)
    assert all(len(page) <= page_size for page in pages)


def test_one_token_serves_all_pages(registry) -> None:  # type: ignore[no-untyped-def]
    before = registry.token_requests()
    with client(registry) as c:
        pages = list(c.iter_repository_pages(2))
        tags = c.list_tags(REPO)
        c.get_manifest(REPO, tags[0])
        # each scope: one request refused with a challenge, then every page with the same token
        assert c.requests_sent == (1 + len(pages)) + (1 + 1) + 1
    assert registry.token_requests() - before == 2
    scopes = [scope for _, scope in registry.tokens.issued[-2:]]
    assert scopes == ["registry:catalog:*", f"repository:{REPO}:pull"]


def test_image_manifest_digest_matches_what_was_pushed(registry) -> None:  # type: ignore[no-untyped-def]
    tag = "12.1.1-runtime-ubuntu22.04"
    with client(registry) as c:
        manifest = c.get_manifest(REPO, tag)
        by_digest = c.get_manifest(REPO, manifest.digest)
    assert manifest.media_type == OCI_MANIFEST
    assert manifest.digest == registry.pushed[tag].digest
    assert by_digest.body == manifest.body and not manifest.is_index


def test_index_resolves_to_the_amd64_image(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry) as c:
        index = c.get_manifest(REPO, registry.index_tag)
        assert index.media_type == OCI_INDEX and index.is_index
        assert pick_platform(index, ("linux", "arm64")) == registry.arm64_digest
        info = inspect_image(c, REPO, registry.index_tag)
    pushed = registry.pushed[registry.index_tag]
    assert info.digest == pushed.digest
    assert info.image_digest == pushed.image_digest != pushed.digest
    assert info.platform == "linux/amd64"
    assert info.cuda_version == "12.4.1"
    assert info.require_cuda is not None and info.require_cuda.startswith("cuda>=12.4")


def test_missing_platform_is_not_found(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry) as c, pytest.raises(NotFound, match="linux/ppc64le"):
        inspect_image(c, REPO, registry.index_tag, ("linux", "ppc64le"))


def test_docker_schema2_manifest_and_config_env(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry) as c:
        manifest = c.get_manifest(REPO, registry.docker_tag)
        info = inspect_image(c, REPO, registry.docker_tag)
        config = json.loads(c.get_blob(REPO, manifest.body["config"]["digest"]))
    assert manifest.media_type == DOCKER_MANIFEST
    assert info.digest == info.image_digest == registry.pushed[registry.docker_tag].digest
    assert info.env["CUDA_VERSION"] == "12.8.1"
    assert config["config"]["Env"][0].startswith("PATH=")


def test_unknown_repository_and_tag_are_not_found(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry) as c:
        with pytest.raises(NotFound):
            c.list_tags("nvidia/no-such-repo")
        with pytest.raises(NotFound):
            c.get_manifest(REPO, "99.0.0-runtime-ubuntu22.04")


def test_wrong_password_is_an_auth_error(registry) -> None:  # type: ignore[no-untyped-def]
    with (
        client(registry, username=registry.pusher[0], password="not-the-password") as c,
        pytest.raises(AuthError),
    ):
        c.list_tags(REPO)


def test_right_password_gets_a_named_token(registry) -> None:  # type: ignore[no-untyped-def]
    with client(registry, username=registry.pusher[0], password=registry.pusher[1]) as c:
        assert set(c.list_tags(REPO)) == set(registry.tags)
    assert registry.tokens.issued[-1][0] == registry.pusher[0]


def test_untrusted_certificate_is_refused(registry) -> None:  # type: ignore[no-untyped-def]
    with RegistryClient(registry.host) as c, pytest.raises(InfraError, match=r"cannot reach .*TLS"):
        c.list_tags(REPO)
