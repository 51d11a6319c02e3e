"""Which source images the emulator's importImage can copy: it reaches no public registry, so it
decides what exists from what it knows, and fails the import of anything else as Azure does.

Known (docs/emulator.md, UNCONFIRMED where guessed):
- an image the size table models (`timing.IMAGE_SIZES_GB`: PyTorch, CUDA, cuDNN, vLLM, NIM, ...);
- a Docker Hub official image from a short list of common bases (`PUBLIC_REPOSITORIES`);
- an image in this machine's Podman storage (the one its containers run from);
- an image in a registry on this machine's loopback (a test's own registry), asked over HTTP: a
  404 for the manifest is missing, any other answer (a 401 from a registry behind token auth
  included) is taken to exist.
Anything else (`nosuch/image:1`) fails the import, as a missing source does on Azure.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request

from aca_gpu.emulator.timing import IMAGE_SIZES_GB
from aca_gpu.emulator.workloads.podman import podman_binary

# Docker Hub repositories the emulator takes to exist without a manifest (UNCONFIRMED list: the
# official images a GPU job is commonly built on or probes with)
PUBLIC_REPOSITORIES = frozenset(
    {
        "alpine",
        "busybox",
        "debian",
        "ubuntu",
        "python",
        "nginx",
        "hello-world",
        "library/alpine",
        "library/busybox",
        "library/debian",
        "library/ubuntu",
        "library/python",
        "library/nginx",
        "library/hello-world",
    }
)
_DOCKER_HUB = ("docker.io", "registry-1.docker.io", "index.docker.io")
_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_PODMAN_TTL_S = 5.0
_PODMAN: dict[str, tuple[bool, float]] = {}


def _split(full: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of a full reference; Docker Hub when no host."""
    head, _, rest = full.partition("/")
    host, path = (
        (head, rest) if rest and ("." in head or ":" in head or head == "localhost") else ("docker.io", full)
    )
    if "@" in path:
        repository, _, ref = path.partition("@")
    else:
        repository, sep, ref = path.rpartition(":")
        if not sep or "/" in ref:
            repository, ref = path, "latest"
    return host.lower(), repository.lower(), ref


def _modelled(full: str) -> bool:
    lowered = full.lower()
    return any(word in lowered for words, _size in IMAGE_SIZES_GB for word in words)


def _in_podman(full: str) -> bool:
    binary = podman_binary()
    if binary is None:
        return False
    known = _PODMAN.get(full)
    if known is not None and time.monotonic() - known[1] < _PODMAN_TTL_S:
        return known[0]
    try:
        found = subprocess.run(
            [binary, "image", "exists", full], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    _PODMAN[full] = (found.returncode == 0, time.monotonic())
    return found.returncode == 0


def _loopback_answer(host: str, repository: str, ref: str) -> str | None:
    """Why a loopback registry says the image is missing, or None when it may exist."""
    accept = ", ".join(
        (
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        )
    )
    for scheme in ("https", "http"):
        request = urllib.request.Request(
            f"{scheme}://{host}/v2/{repository}/manifests/{ref}", method="HEAD", headers={"Accept": accept}
        )
        try:
            import ssl

            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the test's own CA
            with urllib.request.urlopen(request, timeout=3, context=context):
                return None
        except urllib.error.HTTPError as exc:
            return f"manifest unknown: {host}/{repository}:{ref}" if exc.code == 404 else None
        except (OSError, ValueError):
            continue
    return f"registry {host} could not be reached"


def unknown_source(full: str) -> str | None:
    """Why the import of `full` fails (the registry's words), or None when the emulator knows it."""
    host, repository, ref = _split(full)
    if host.split(":")[0] in _LOOPBACK or host.startswith("[::1]"):
        return _loopback_answer(host, repository, ref)
    if _modelled(full):
        return None
    if host in _DOCKER_HUB and repository in PUBLIC_REPOSITORIES:
        return None
    if _in_podman(full):
        return None
    return f"manifest unknown: {full} was not found in {host} (the emulator knows no such image)"
