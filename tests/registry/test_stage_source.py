"""`image stage` reads each image from its own registry before anything is made: a real registry
(docker-registry on loopback) answers the digest and the compressed size, and a tag it does not
have is bad input (exit 2) with the command that lists the real ones."""

from __future__ import annotations

import pytest

from aca_gpu.errors import EXIT_BAD_INPUT, BadInput
from aca_gpu.gpu.image_ref import parse_image_ref
from aca_gpu.workflow.env.staging.stage import read_source


def test_the_digest_and_size_come_from_the_manifest(registry, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", registry.ca_bundle)
    tag = "12.1.1-runtime-ubuntu22.04"
    facts = read_source(parse_image_ref(f"{registry.host}/nvidia/cuda:{tag}"))
    assert facts.unread == "" and facts.digest == registry.pushed[tag].digest
    assert facts.size_bytes is not None and facts.size_bytes > 0


def test_a_tag_the_registry_does_not_have_is_refused(registry, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", registry.ca_bundle)
    with pytest.raises(BadInput) as caught:
        read_source(parse_image_ref(f"{registry.host}/nvidia/cuda:99.9.9-base-ubuntu22.04"))
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert "does not exist" in caught.value.message and "acagpu tags" in (caught.value.hint or "")
