"""Manifests and image configs, independent of who serves them (a plain OCI registry or ACR).

`RegistrySource` is the small contract: list tags, fetch a manifest, fetch a blob. The HTTP client
in `client.py` implements it; so does the ACR adapter in `aca_gpu/azure/acr.py`, which the workflow
passes in, so this package never imports the Azure SDK.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aca_gpu.errors import CloudError, NotFound

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
IMAGE_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ALL_MANIFEST_TYPES = (*INDEX_TYPES, *IMAGE_TYPES)

DEFAULT_PLATFORM = ("linux", "amd64")  # what ACA GPU nodes run


@dataclass(frozen=True)
class Manifest:
    """A manifest as served: its media type, the digest of its exact bytes, and the parsed body."""

    media_type: str
    digest: str
    body: Mapping[str, Any]

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES or "manifests" in self.body

    @classmethod
    def from_bytes(cls, raw: bytes, media_type: str | None, digest: str | None = None) -> Manifest:
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise CloudError("registry sent a manifest that is not JSON") from exc
        if not isinstance(body, dict):
            raise CloudError("registry sent a manifest that is not a JSON object")
        actual = sha256_digest(raw)
        if digest and digest.startswith("sha256:") and digest != actual:
            raise CloudError(f"manifest digest mismatch: registry said {digest}, content is {actual}")
        kind = (media_type or "").split(";")[0].strip() or str(body.get("mediaType", ""))
        return cls(kind, actual, body)


@dataclass(frozen=True)
class ImageInfo:
    """What `acagpu tags --inspect` and validation record: tags move, digests do not."""

    repository: str
    reference: str
    digest: str  # the digest the tag points at (an index when multi-platform)
    image_digest: str  # the linux/amd64 image manifest's digest
    platform: str
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def cuda_version(self) -> str | None:
        return self.env.get("CUDA_VERSION")

    @property
    def require_cuda(self) -> str | None:
        return self.env.get("NVIDIA_REQUIRE_CUDA")

    def as_dict(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "reference": self.reference,
            "digest": self.digest,
            "image_digest": self.image_digest,
            "platform": self.platform,
            "cuda_version": self.cuda_version,
            "require_cuda": self.require_cuda,
        }


class RegistrySource(Protocol):
    """What tag discovery and image inspection need from a registry."""

    def list_tags(self, repository: str) -> list[str]: ...

    def get_manifest(self, repository: str, reference: str) -> Manifest: ...

    def get_blob(self, repository: str, digest: str) -> bytes: ...


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pick_platform(index: Manifest, platform: Sequence[str] = DEFAULT_PLATFORM) -> str:
    """The digest of the index entry for `platform` (os, architecture); NotFound when absent."""
    os_name, arch = platform[0], platform[1]
    offered = []
    for entry in index.body.get("manifests") or []:
        plat = entry.get("platform") or {}
        offered.append(f"{plat.get('os')}/{plat.get('architecture')}")
        if plat.get("os") == os_name and plat.get("architecture") == arch:
            return str(entry["digest"])
    raise NotFound(f"no {os_name}/{arch} image in the index (offers: {', '.join(offered) or 'nothing'})")


def parse_env(config: Mapping[str, Any]) -> dict[str, str]:
    """`config.Env` (["KEY=value", ...]) as a dict; later entries win as they do in a container."""
    env: dict[str, str] = {}
    for item in (config.get("config") or {}).get("Env") or []:
        key, sep, value = str(item).partition("=")
        if sep:
            env[key] = value
    return env


def inspect_image(
    source: RegistrySource, repository: str, reference: str, platform: Sequence[str] = DEFAULT_PLATFORM
) -> ImageInfo:
    """Resolve a tag to its linux/amd64 image and read the config's environment."""
    top = source.get_manifest(repository, reference)
    image = top
    if top.is_index:
        image = source.get_manifest(repository, pick_platform(top, platform))
    config_desc = image.body.get("config") or {}
    config_digest = config_desc.get("digest")
    if not isinstance(config_digest, str):
        raise CloudError(f"manifest {image.digest} of {repository} has no config descriptor")
    raw = source.get_blob(repository, config_digest)
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise CloudError(f"config blob {config_digest} of {repository} is not JSON") from exc
    plat = f"{config.get('os', platform[0])}/{config.get('architecture', platform[1])}"
    return ImageInfo(repository, reference, top.digest, image.digest, plat, parse_env(config))
