"""Container image references: registry, repository, tag, digest, and the CUDA facts a tag reveals.

Parsing follows the Docker reference grammar (distribution/reference): a first path component is a
registry host only when it contains a dot or a port, or is `localhost`; otherwise the image lives on
Docker Hub, where single-component names get the `library/` namespace. The CUDA version, flavor and
OS are derived only from tag schemes that state them (`nvidia/cuda:12.1.1-runtime-ubuntu22.04`,
`pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime`, `...-cu121`); anything else leaves them `None`
rather than guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aca_gpu.errors import BadInput

DOCKER_HUB = "docker.io"
DOCKER_HUB_API_HOST = "registry-1.docker.io"  # where docker.io's registry API actually answers
_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_HOST_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = re.compile(rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9a-fA-F:]+\])(?::[0-9]{{1,5}})?")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"([a-z0-9]+(?:[.+_-][a-z0-9]+)*):([0-9a-fA-F]{32,})")
_DIGEST_HEX_LEN = {"sha256": 64, "sha384": 96, "sha512": 128}
_MAX_NAME = 255

# nvidia/cuda: <x.y[.z]>-[cudnn[N]-]<base|runtime|devel>[-tensorrt...]-<os>
# (NVIDIA's container-images/cuda README)
_NVIDIA_CUDA_TAG = re.compile(
    r"^(?P<cuda>\d+\.\d+(?:\.\d+)?)-(?P<flavor>(?:cudnn\d*-)?(?:base|runtime|devel)|tensorrt-(?:runtime|devel))"
    r"(?:-(?P<os>[a-z]+[0-9][0-9.]*))?$"
)
# generic tags that spell the toolkit out: "cuda12.4", "cuda-12.1", "cuda_11.8.0"
_CUDA_IN_TAG = re.compile(r"(?:^|[-_.])cuda[-_]?(?P<cuda>\d+\.\d+(?:\.\d+)?)(?=$|[-_])", re.IGNORECASE)
# PyTorch wheel-style suffix: cu118 -> 11.8, cu121 -> 12.1, cu130 -> 13.0
_CU_SHORT = re.compile(r"(?:^|[-_.+])cu(?P<major>1\d)(?P<minor>\d)(?=$|[-_.])")
_FLAVOR_IN_TAG = re.compile(r"(?:^|-)(?P<flavor>(?:cudnn\d*-)?(?:base|runtime|devel))(?=$|-)")
_OS_IN_TAG = re.compile(
    r"(?:^|-)(?P<os>(?:ubuntu\d+\.\d+|ubi\d+|rockylinux\d+|centos\d+|oraclelinux\d+|amzn\d+|cm\d+|azl\d+"
    r"|debian\d*|bookworm|bullseye|jammy|noble|focal))(?=$|-)"
)


@dataclass(frozen=True)
class ImageRef:
    """A parsed, normalised image reference.

    `registry` is the canonical registry name (`docker.io` for Docker Hub); `registry_host` is where
    its API answers. `repository` always carries its namespace (`library/ubuntu`, `nvidia/cuda`).
    A reference with neither tag nor digest gets tag `latest`, as `docker pull` does.
    """

    registry: str
    repository: str
    tag: str | None
    digest: str | None
    cuda_version: str | None = None
    flavor: str | None = None
    os: str | None = None

    @property
    def registry_host(self) -> str:
        return DOCKER_HUB_API_HOST if self.registry == DOCKER_HUB else self.registry

    @property
    def is_docker_hub(self) -> bool:
        return self.registry == DOCKER_HUB

    @property
    def reference(self) -> str:
        """What to ask the registry's manifests endpoint for: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def is_nvidia_cuda(self) -> bool:
        """NVIDIA's own CUDA base images (Docker Hub or NGC), or a mirror of them in a private
        registry (`contoso.azurecr.io/mirror/nvidia/cuda`), whose tags and env we know."""
        return is_cuda_repository(self.repository)

    @property
    def familiar(self) -> str:
        """The short form people type: Docker Hub's host and `library/` left out."""
        if self.is_docker_hub:
            return self.repository.removeprefix("library/") + self._suffix()
        return f"{self.registry}/{self.repository}{self._suffix()}"

    def _suffix(self) -> str:
        out = f":{self.tag}" if self.tag else ""
        return out + (f"@{self.digest}" if self.digest else "")

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}{self._suffix()}"

    def as_dict(self) -> dict[str, str | None]:
        return {
            "reference": str(self),
            "registry": self.registry,
            "repository": self.repository,
            "tag": self.tag,
            "digest": self.digest,
            "cuda_version": self.cuda_version,
            "flavor": self.flavor,
            "os": self.os,
        }


def _split_domain(name: str) -> tuple[str, str]:
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        if not _DOMAIN.fullmatch(first):
            raise BadInput(f"invalid registry host {first!r} in image reference")
        host = first.lower()
        return (DOCKER_HUB if host in _HUB_ALIASES else host), rest
    return DOCKER_HUB, name


def is_cuda_repository(repository: str) -> bool:
    """`nvidia/cuda`, or a path ending in it: behind a firewall the official repository is mirrored
    under a prefix of the private registry's own."""
    return repository == "nvidia/cuda" or repository.endswith("/nvidia/cuda")


def _cuda_facts(repository: str, tag: str | None) -> tuple[str | None, str | None, str | None]:
    if not tag:
        return None, None, None
    if is_cuda_repository(repository):
        m = _NVIDIA_CUDA_TAG.match(tag)
        if m:
            return m["cuda"], m["flavor"], m["os"]
    cuda: str | None = None
    m_cuda = _CUDA_IN_TAG.search(tag)
    if m_cuda:
        cuda = m_cuda["cuda"]
    else:
        m_cu = _CU_SHORT.search(tag)
        if m_cu:
            cuda = f"{m_cu['major']}.{m_cu['minor']}"
    m_flavor = _FLAVOR_IN_TAG.search(tag)
    m_os = _OS_IN_TAG.search(tag)
    return cuda, (m_flavor["flavor"] if m_flavor else None), (m_os["os"] if m_os else None)


def parse_image_ref(text: str) -> ImageRef:
    """Parse `[registry/]name[:tag][@digest]`; anything the Docker grammar rejects raises BadInput."""
    raw = text.strip()
    if not raw or any(ch.isspace() for ch in raw):
        raise BadInput(f"invalid image reference {text!r}: empty or contains whitespace")
    name, at, digest_text = raw.partition("@")
    digest: str | None = None
    if at:
        m = _DIGEST.fullmatch(digest_text)
        want = _DIGEST_HEX_LEN.get(m.group(1)) if m else None
        if not m or (want is not None and len(m.group(2)) != want):
            raise BadInput(f"invalid digest {digest_text!r} in image reference {raw!r}")
        digest = digest_text.lower()
    tag: str | None = None
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise BadInput(f"invalid tag {tag!r} in image reference {raw!r}")
    if not name:
        raise BadInput(f"invalid image reference {raw!r}: no repository name")
    registry, path = _split_domain(name)
    if not path:
        raise BadInput(f"invalid image reference {raw!r}: no repository after the registry")
    components = path.split("/")
    bad = [c for c in components if not _COMPONENT.fullmatch(c)]
    if bad:
        raise BadInput(
            f"invalid image reference {raw!r}: repository part {bad[0]!r} must be lowercase letters, "
            "digits and separators"
        )
    if registry == DOCKER_HUB and len(components) == 1:
        components.insert(0, "library")
    repository = "/".join(components)
    if len(registry) + 1 + len(repository) > _MAX_NAME:
        raise BadInput(f"invalid image reference {raw!r}: name longer than {_MAX_NAME} characters")
    if tag is None and digest is None:
        tag = "latest"
    cuda, flavor, os_name = _cuda_facts(repository, tag)
    return ImageRef(registry, repository, tag, digest, cuda, flavor, os_name)
