"""Real containers through Podman (Debian's podman + runc, as root): no registry, no GPU.

The test image is built here from this machine's own files: dash as /bin/sh and the C library it
loads, imported with `podman import`. Like every CUDA base image, it has no nvidia-smi: a GPU
runtime mounts that in with the driver, so its absence is what a container without a GPU sees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# a tag of this process's own: a second test run on the machine shares Podman's storage
IMAGE = f"localhost/acagpu-test:sh-{os.getpid()}"
INSTALL = "tests/local/install-podman.sh"


def _libraries(binary: str) -> list[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
            found.append(parts[2])
        elif parts and parts[0].startswith("/"):
            found.append(parts[0])
    return found


def _build_rootfs(tmp: Path) -> Path:
    """A tarball of /bin/sh (dash) and its libraries, at the paths they have here."""
    shell = shutil.which("dash") or "/bin/sh"
    tar_path = tmp / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(os.path.realpath(shell), arcname="bin/sh")
        for lib in _libraries(shell):
            tar.add(os.path.realpath(lib), arcname=lib.lstrip("/"))
    return tar_path


@pytest.fixture(scope="session")
def podman() -> str:
    binary = shutil.which("podman")
    if binary is None:
        pytest.skip(f"podman is not installed: {INSTALL} installs it (root, apt-get)")
    if os.geteuid() != 0:
        pytest.skip(f"these tests run podman as root, as {INSTALL} configures it")
    return binary


@pytest.fixture(scope="session")
def test_image(podman: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tar_path = _build_rootfs(tmp_path_factory.mktemp("rootfs"))
    done = subprocess.run([podman, "import", "-q", str(tar_path), IMAGE], capture_output=True, text=True)
    assert done.returncode == 0, f"podman import failed: {done.stderr.strip()}"
    yield IMAGE
    subprocess.run([podman, "rmi", "-f", IMAGE], capture_output=True, check=False)
