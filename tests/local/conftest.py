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


# a served model stand-in baked into PYTHON_IMAGE: answers every GET with the replica's hostname
STANDIN = """
import http.server, socket, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = socket.gethostname().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""
PYTHON_IMAGE = f"localhost/acagpu-test:python-{os.getpid()}"
# what the stand-in imports, and what HTTPServer's bind reaches (getfqdn: the idna codec)
_STANDIN_IMPORTS = "import http.server, socket, sys, encodings.idna; socket.getfqdn('localhost')"


def _python_rootfs(tmp: Path) -> Path:
    """A tarball of this interpreter, the libraries it loads and the standard modules the stand-in
    imports (found by importing them here), at the paths they have here, plus the stand-in as
    /srv/standin.py and `python3` on PATH: an image of a few tens of MB, no registry needed."""
    import glob
    import json
    import sys
    import sysconfig

    exe = os.path.realpath(sys.executable)
    listed = subprocess.run(
        [exe, "-S", "-I", "-c", _STANDIN_IMPORTS + "; import json; print(json.dumps(sorted("
         "{m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)})))"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    stdlib = sysconfig.get_paths()["stdlib"]
    files = [
        *json.loads(listed),
        os.path.join(stdlib, "os.py"),
        *glob.glob(os.path.join(stdlib, "encodings", "*.py")),
    ]
    binaries = [exe, *(f for f in files if f.endswith(".so"))]
    files += [lib for binary in binaries for lib in _libraries(binary)] + [exe]
    (tmp / "standin.py").write_text(STANDIN, encoding="utf-8")
    tar_path = tmp / "python.tar"
    with tarfile.open(tar_path, "w") as tar:
        for path in sorted(set(files)):
            tar.add(os.path.realpath(path), arcname=path.lstrip("/"))
        tar.add(tmp / "standin.py", arcname="srv/standin.py")
        link = tarfile.TarInfo("usr/local/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, exe
        tar.addfile(link)
    return tar_path


@pytest.fixture(scope="session")
def python_image(podman: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An image with this interpreter and a model stand-in at /srv/standin.py (PORT as its argument)."""
    tar_path = _python_rootfs(tmp_path_factory.mktemp("pyroot"))
    done = subprocess.run(
        [podman, "import", "-q", str(tar_path), PYTHON_IMAGE], capture_output=True, text=True
    )
    assert done.returncode == 0, f"podman import failed: {done.stderr.strip()}"
    yield PYTHON_IMAGE
    subprocess.run([podman, "rmi", "-f", PYTHON_IMAGE], capture_output=True, check=False)
