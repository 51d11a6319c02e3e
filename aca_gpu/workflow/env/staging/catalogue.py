"""Names and the catalogue of what is staged, kept where every run can read it: the registry's tags.

One registry per environment (named from the subscription and the environment, like its storage
account: found again by every run, and another subscription's environment of the same name gets
another one, since registry names are global). Each staged image is one tag on the registry,
`acagpu-staged-<8 hex>` = `image|repository:tag|digest|bytes[|streaming]`: a run reads the registry once (one
ARM GET) to know what it may pull from there, and `env show` lists the same.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import DOCKER_HUB, parse_image_ref

PREFIX = "acagpu"
HASH_CHARS = 8
MAX_NAME = 50  # ACR: 5-50 letters and digits, unique across Azure
TAG_PREFIX = "acagpu-staged-"
TAG_VALUE_MAX = 256  # ARM's limit on a tag value


def registry_name(subscription: str, env_name: str) -> str:
    digest = hashlib.sha256(f"{subscription.lower()}/{env_name.lower()}/acr".encode()).hexdigest()[
        :HASH_CHARS
    ]
    middle = re.sub(r"[^a-z0-9]", "", env_name.lower())[: MAX_NAME - len(PREFIX) - HASH_CHARS]
    return f"{PREFIX}{middle}{digest}"


def key_of(image: str) -> str:
    """The one spelling of an image the catalogue is keyed by (`pytorch/pytorch:x` and
    `docker.io/pytorch/pytorch:x` are one image); the text itself when it does not parse."""
    try:
        return str(parse_image_ref(image))
    except BadInput:
        return image.strip()


def target_of(image: str) -> tuple[str, str, str]:
    """(source registry for ARM's import, source image, repository:tag in the environment's registry).
    Docker Hub images keep their path (`pytorch/pytorch:…`); others are prefixed with their registry
    (`nvcr.io/nvidia/pytorch:…`), so two registries' same-named images do not collide."""
    ref = parse_image_ref(image)
    tag = ref.tag or "latest"
    source = f"{ref.repository}:{tag}" if not ref.digest else f"{ref.repository}@{ref.digest}"
    repo = ref.repository if ref.registry == DOCKER_HUB else f"{ref.registry.lower()}/{ref.repository}"
    return ref.registry, source, f"{repo}:{tag}"


@dataclass(frozen=True)
class Staged:
    image: str  # as the user named it
    target: str  # repository:tag in the environment's registry
    digest: str | None
    size_bytes: int | None
    streaming: bool = False  # ACR converted it into a streaming artifact (`image stage --stream`)

    def tag_key(self) -> str:
        return TAG_PREFIX + hashlib.sha256(self.image.encode()).hexdigest()[:HASH_CHARS]

    def tag_value(self) -> str:
        value = f"{self.image}|{self.target}|{self.digest or '-'}|{self.size_bytes or '-'}"
        if self.streaming:
            value += "|streaming"
        return value[:TAG_VALUE_MAX]

    def ref(self, login_server: str) -> str:
        """What a run pulls: by tag (artifact streaming serves only pulls by tag)."""
        return f"{login_server}/{self.target}"

    def as_dict(self, login_server: str) -> dict[str, object]:
        return {
            "image": self.image,
            "staged_as": self.ref(login_server),
            "digest": self.digest,
            "bytes": self.size_bytes,
            "streaming": "converted" if self.streaming else "off",
        }


def read(tags: Mapping[str, str]) -> dict[str, Staged]:
    """image -> Staged, from a registry's tags (entries that do not parse are skipped)."""
    found: dict[str, Staged] = {}
    for k, v in tags.items():
        if not k.startswith(TAG_PREFIX):
            continue
        parts = v.split("|")
        if len(parts) not in (4, 5) or not parts[0] or not parts[1]:
            continue
        image, target, digest, size = parts[:4]
        found[image] = Staged(
            image,
            target,
            None if digest == "-" else digest,
            int(size) if size.isdigit() else None,
            parts[4:] == ["streaming"],
        )
    return found
