"""The start-up banner an `nvidia/cuda` image's entrypoint prints before running its command.

The real entrypoint prints it to the container's console on every start, so a live explorer's log
stream opens with these lines; emulated explorers print the same so log clients have real lines to read.
The driver warning replaces nothing: it follows the banner when the container sees no GPU.
"""

from __future__ import annotations

import re

_CUDA_TAG = re.compile(r"(?:^|/)nvidia/cuda:(?P<version>\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)


def cuda_image_version(image: str) -> str | None:
    """`12.4.1` for `nvidia/cuda:12.4.1-base-ubuntu22.04` (any registry prefix); None for other images."""
    m = _CUDA_TAG.search(image)
    return m.group("version") if m else None


def cuda_banner(image: str, *, gpu: bool) -> list[str]:
    """The banner's lines for an nvidia/cuda image, or no lines for any other image."""
    version = cuda_image_version(image)
    if version is None:
        return []
    lines = [
        "",
        "==========",
        "== CUDA ==",
        "==========",
        "",
        f"CUDA Version {version}",
        "",
        "Container image Copyright (c) 2016-2023, NVIDIA CORPORATION & AFFILIATES. All rights reserved.",
        "",
        "This container image and its contents are governed by the NVIDIA Deep Learning Container License.",
        "By pulling and using the container, you accept the terms and conditions of this license:",
        "https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license",
        "",
        "A copy of this license is made available in this container at /NGC-DL-CONTAINER-LICENSE for your "
        "convenience.",
        "",
    ]
    if not gpu:
        lines += [
            "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.",
            "   Use the NVIDIA Container Toolkit to start this container with GPU support; see",
            "   https://docs.nvidia.com/datacenter/cloud-native/ .",
            "",
        ]
    return lines
