"""Image reference parsing: the Docker grammar, registry normalisation, and CUDA facts from tags."""

from __future__ import annotations

import pytest

from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref

DIGEST = "sha256:" + "0123456789abcdef" * 4

# text -> (registry, repository, tag, digest, registry_host, str(ref))
REFS = {
    "nvidia/cuda:12.1.1-runtime-ubuntu22.04": (
        "docker.io",
        "nvidia/cuda",
        "12.1.1-runtime-ubuntu22.04",
        None,
        "registry-1.docker.io",
        "docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04",
    ),
    "ubuntu": (
        "docker.io",
        "library/ubuntu",
        "latest",
        None,
        "registry-1.docker.io",
        "docker.io/library/ubuntu:latest",
    ),
    "library/ubuntu:24.04": (
        "docker.io",
        "library/ubuntu",
        "24.04",
        None,
        "registry-1.docker.io",
        "docker.io/library/ubuntu:24.04",
    ),
    "docker.io/ubuntu:22.04": (
        "docker.io",
        "library/ubuntu",
        "22.04",
        None,
        "registry-1.docker.io",
        "docker.io/library/ubuntu:22.04",
    ),
    "index.docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04": (
        "docker.io",
        "nvidia/cuda",
        "12.4.1-base-ubuntu22.04",
        None,
        "registry-1.docker.io",
        "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
    ),
    "nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04": (
        "nvcr.io",
        "nvidia/cuda",
        "12.4.1-devel-ubuntu22.04",
        None,
        "nvcr.io",
        "nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04",
    ),
    "myacr.azurecr.io/x:y": ("myacr.azurecr.io", "x", "y", None, "myacr.azurecr.io", "myacr.azurecr.io/x:y"),
    "MyACR.AzureCR.io/team/app:v1.2": (
        "myacr.azurecr.io",
        "team/app",
        "v1.2",
        None,
        "myacr.azurecr.io",
        "myacr.azurecr.io/team/app:v1.2",
    ),
    "localhost:5000/x": ("localhost:5000", "x", "latest", None, "localhost:5000", "localhost:5000/x:latest"),
    "localhost/x:1": ("localhost", "x", "1", None, "localhost", "localhost/x:1"),
    f"ubuntu@{DIGEST}": (
        "docker.io",
        "library/ubuntu",
        None,
        DIGEST,
        "registry-1.docker.io",
        f"docker.io/library/ubuntu@{DIGEST}",
    ),
    f"ghcr.io/org/img:1.0@{DIGEST}": (
        "ghcr.io",
        "org/img",
        "1.0",
        DIGEST,
        "ghcr.io",
        f"ghcr.io/org/img:1.0@{DIGEST}",
    ),
    "ghcr.io/a/b/c/d:x_y-z.1": ("ghcr.io", "a/b/c/d", "x_y-z.1", None, "ghcr.io", "ghcr.io/a/b/c/d:x_y-z.1"),
}


@pytest.mark.parametrize("text", sorted(REFS))
def test_parses_references(text: str) -> None:
    registry, repository, tag, digest, host, full = REFS[text]
    ref = parse_image_ref(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert ref.registry_host == host
    assert str(ref) == full
    assert parse_image_ref(str(ref)) == ref  # canonical form round-trips


def test_reference_prefers_digest_and_familiar_form_drops_hub_defaults() -> None:
    pinned = parse_image_ref(f"nvidia/cuda:12.4.1-base-ubuntu22.04@{DIGEST}")
    assert pinned.reference == DIGEST
    assert parse_image_ref("ubuntu:22.04").reference == "22.04"
    assert parse_image_ref("ubuntu:22.04").familiar == "ubuntu:22.04"
    assert parse_image_ref("nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04").familiar == (
        "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04"
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Nvidia/cuda:12.1.1",  # upper case in the repository
        "nvidia/cuda:",  # empty tag
        "nvidia/cuda:-bad",  # tag must start with a word character
        "nvidia/cuda:" + "a" * 129,  # tag longer than 128
        "nvidia//cuda",
        "nvidia/cuda@sha256:abc",  # digest too short
        "nvidia/cuda@sha256:" + "g" * 64,  # not hex
        "nvidia/cuda@sha256:" + "a" * 63,  # wrong length for sha256
        "nvidia cuda",
        "myacr.azurecr.io/",
        "-bad.example.com/x",
        "x/-y",
        "a" * 300,
    ],
)
def test_rejects_invalid_references(text: str) -> None:
    with pytest.raises(BadInput):
        parse_image_ref(text)


# text -> (cuda_version, flavor, os)
CUDA_TAGS = {
    "nvidia/cuda:12.1.1-runtime-ubuntu22.04": ("12.1.1", "runtime", "ubuntu22.04"),
    "nvidia/cuda:12.4.1-base-ubuntu22.04": ("12.4.1", "base", "ubuntu22.04"),
    "nvidia/cuda:13.0.0-devel-ubuntu24.04": ("13.0.0", "devel", "ubuntu24.04"),
    "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04": ("12.4.1", "cudnn-runtime", "ubuntu22.04"),
    "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04": ("11.8.0", "cudnn8-devel", "ubuntu22.04"),
    "nvidia/cuda:12.8.1-runtime-ubi9": ("12.8.1", "runtime", "ubi9"),
    "nvidia/cuda:13.0.0-tensorrt-runtime-ubuntu24.04": ("13.0.0", "tensorrt-runtime", "ubuntu24.04"),
    "nvidia/cuda:10.2-base-ubuntu18.04": ("10.2", "base", "ubuntu18.04"),
    "nvcr.io/nvidia/cuda:12.6.3-runtime-rockylinux9": ("12.6.3", "runtime", "rockylinux9"),
    "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime": ("12.4", "cudnn9-runtime", None),
    "pytorch/pytorch:2.2.0-cuda12.1-cudnn8-devel": ("12.1", "cudnn8-devel", None),
    "ghcr.io/x/trainer:1.0-cu121": ("12.1", None, None),
    "ghcr.io/x/trainer:cu118-ubuntu22.04": ("11.8", None, "ubuntu22.04"),
    "nvidia/cuda:latest": (None, None, None),
    "ubuntu:22.04": (None, None, None),
    "nvcr.io/nvidia/pytorch:24.05-py3": (None, None, None),
    "tensorflow/tensorflow:2.15.0-gpu": (None, None, None),
    "ghcr.io/x/y:cudatoolkit": (None, None, None),
}


@pytest.mark.parametrize("text", sorted(CUDA_TAGS))
def test_derives_cuda_facts_only_from_tags_that_state_them(text: str) -> None:
    ref = parse_image_ref(text)
    assert (ref.cuda_version, ref.flavor, ref.os) == CUDA_TAGS[text]


def test_nvidia_cuda_detection_covers_both_registries() -> None:
    assert parse_image_ref("nvidia/cuda:12.4.1-base-ubuntu22.04").is_nvidia_cuda
    assert parse_image_ref("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04").is_nvidia_cuda
    assert not parse_image_ref("pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime").is_nvidia_cuda


def test_as_dict_carries_every_field() -> None:
    ref = parse_image_ref("nvidia/cuda:12.1.1-runtime-ubuntu22.04")
    doc = ref.as_dict()
    assert doc["reference"] == str(ref)
    assert doc["cuda_version"] == "12.1.1"
    assert isinstance(ref, ImageRef)
