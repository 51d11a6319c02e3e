"""Which source images the emulator's importImage can copy: it reaches no public registry, so it
decides what exists from what it knows, and fails the import of anything else as Azure does.

Known (docs/emulator.md, UNCONFIRMED where guessed):
- an image of a repository the size table's images live in (`MODELLED_REPOSITORIES`: nvidia/cuda,
  pytorch/pytorch, ... on Docker Hub, nvcr.io's NVIDIA and NIM ones), by its exact name: a typo
  (`nvida/cuda`) is not CUDA;
- a Docker Hub official image from a short list of common bases (`PUBLIC_REPOSITORIES`);
- an image in this machine's Podman storage (the one its containers run from);
- an image in a registry on this machine's loopback (a test's own registry), asked over HTTP: a
  404 for the manifest is missing, any other answer (a 401 from a registry behind token auth
  included) is taken to exist;
- any image of a registry the emulator does not model (a private ACR it does not hold, ghcr.io,
  mcr.microsoft.com, ...): it cannot read them, so it takes them to exist (`unchecked`).
Anything else on Docker Hub or nvcr.io (`nosuch/image:1`, `nvida/cuda:12.4.1-base-ubuntu22.04`)
fails the import, as a missing source does on Azure, and a job's pull the same way
(`pull_refusal`, emulator/pulls.py).
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request

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
# the repositories of the images `timing.IMAGE_SIZES_GB` models, by registry (UNCONFIRMED list: the
# GPU images acagpu's users are known to run; NIM's repositories are all under nim/)
MODELLED_REPOSITORIES = {
    "docker.io": frozenset(
        {"nvidia/cuda", "nvidia/cudagl", "pytorch/pytorch", "tensorflow/tensorflow", "vllm/vllm-openai"}
    ),
    "nvcr.io": frozenset(
        {"nvidia/cuda", "nvidia/pytorch", "nvidia/tensorflow", "nvidia/tritonserver", "nvidia/nemo"}
    ),
}
_MODELLED_PREFIXES = {"nvcr.io": ("nim/",)}
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


def _modelled(host: str, repository: str) -> bool:
    registry = "docker.io" if host in _DOCKER_HUB else host
    prefixes = _MODELLED_PREFIXES.get(registry, ())
    return repository in MODELLED_REPOSITORIES.get(registry, ()) or repository.startswith(prefixes)


def _local(host: str) -> bool:
    return host.split(":")[0] in _LOOPBACK or host.startswith("[::1]")


def unchecked(full: str) -> bool:
    """Whether `full` is in a registry the emulator does not model, so it cannot say whether the image
    exists (it takes it to exist): not Docker Hub, not nvcr.io, not on this machine."""
    host = _split(full)[0]
    return not _local(host) and host not in _DOCKER_HUB and host not in MODELLED_REPOSITORIES


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
    refused = pull_refusal(full)
    return None if refused is None else refused[1]


def pull_refusal(full: str) -> tuple[str, str] | None:
    """(kind, why) the import or a job's pull of `full` fails, or None. `kind` names the `pull`
    fault's wording it reads as on a job (faults.PULL_ERRORS): `denied` for a Docker Hub repository
    that does not exist (Docker Hub answers an unknown repository with its refusal, containerd's
    `pull access denied, repository does not exist or may require authorization`), `notfound` for a
    missing tag or another registry's missing image, `unreachable` for a loopback registry that does
    not answer."""
    host, repository, ref = _split(full)
    if host == "localhost" and _in_podman(full):  # Podman names its own images localhost/...
        return None
    if _local(host):
        why = _loopback_answer(host, repository, ref)
        if why is None:
            return None
        return ("notfound" if why.startswith("manifest unknown") else "unreachable"), why
    if host in _DOCKER_HUB and repository == "nvidia/cuda" and ref.lower() == "latest":
        return "notfound", f"manifest unknown: {full} (nvidia/cuda has no latest tag)"
    if unchecked(full) or _modelled(host, repository):
        return None
    if host in _DOCKER_HUB and repository in PUBLIC_REPOSITORIES:
        return None
    if _in_podman(full):
        return None
    kind = "denied" if host in _DOCKER_HUB else "notfound"
    return kind, f"manifest unknown: {full} was not found in {host} (the emulator knows no such image)"
