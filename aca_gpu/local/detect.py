"""Which container runtimes are here and usable, and which one `--runtime auto` takes, with why.

Docker counts only when its engine answers (a client alone cannot run anything); Podman needs no
daemon; Apptainer may be installed under its old name, `singularity`. `auto` prefers Docker, then
Podman, then Apptainer: the order in which GPU setups are documented and most often configured.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from aca_gpu.errors import BadInput
from aca_gpu.local.commands import RUNTIMES

PROBE_TIMEOUT = 15.0


@dataclass(frozen=True)
class RuntimeStatus:
    """One runtime on this machine: where it is, its version, whether it can run a container, why."""

    name: str
    binary: str | None
    version: str | None
    usable: bool
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "binary": self.binary,
            "version": self.version,
            "usable": self.usable,
            "reason": self.reason,
        }


def _run(argv: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]} did not answer within {PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def inspect_docker() -> RuntimeStatus:
    binary = shutil.which("docker")
    if binary is None:
        return RuntimeStatus("docker", None, None, False, "docker is not installed")
    code, out, err = _run([binary, "version", "--format", "{{.Client.Version}} {{.Server.Version}}"])
    parts = out.split()
    client = parts[0] if parts else None
    if code == 0 and len(parts) == 2:
        return RuntimeStatus("docker", binary, parts[1], True, f"Docker engine {parts[1]} answers")
    why = _first_line(err) or f"docker version exited {code}"
    return RuntimeStatus(
        "docker",
        binary,
        client,
        False,
        f"docker client {client or '?'} is installed but no Docker engine answers ({why})",
    )


def inspect_podman() -> RuntimeStatus:
    binary = shutil.which("podman")
    if binary is None:
        return RuntimeStatus("podman", None, None, False, "podman is not installed")
    code, out, err = _run([binary, "version", "--format", "{{.Client.Version}}"])
    if code == 0 and out:
        return RuntimeStatus("podman", binary, out, True, f"podman {out} (no daemon needed)")
    return RuntimeStatus("podman", binary, None, False, f"podman does not work: {_first_line(err) or code}")


def inspect_apptainer() -> RuntimeStatus:
    binary = shutil.which("apptainer") or shutil.which("singularity")
    if binary is None:
        return RuntimeStatus("apptainer", None, None, False, "apptainer (or singularity) is not installed")
    code, out, err = _run([binary, "--version"])
    if code == 0 and out:
        return RuntimeStatus("apptainer", binary, out.split()[-1], True, out)
    return RuntimeStatus("apptainer", binary, None, False, f"{binary} --version failed: {_first_line(err)}")


INSPECT = {"docker": inspect_docker, "podman": inspect_podman, "apptainer": inspect_apptainer}


def inspect(name: str) -> RuntimeStatus:
    if name not in INSPECT:
        raise BadInput(f"unknown runtime {name!r}: choose auto, {', '.join(RUNTIMES)}")
    return INSPECT[name]()


def choose(preferred: str = "auto") -> tuple[RuntimeStatus, str]:
    """The runtime to use and a sentence saying why; BadInput when the one asked for cannot run."""
    if preferred != "auto":
        status = inspect(preferred)
        if not status.usable:
            raise BadInput(f"--runtime {preferred}: {status.reason}", code="RuntimeUnavailable")
        return status, f"{preferred} as asked: {status.reason}"
    seen: list[RuntimeStatus] = []
    for name in RUNTIMES:
        status = inspect(name)
        if status.usable:
            passed = "; ".join(f"{s.name}: {s.reason}" for s in seen)
            return status, f"auto picked {name}: {status.reason}" + (f" ({passed})" if passed else "")
        seen.append(status)
    raise BadInput(
        "no usable container runtime: " + "; ".join(f"{s.name}: {s.reason}" for s in seen),
        code="RuntimeUnavailable",
        hint="install Docker with the NVIDIA Container Toolkit, Podman, or Apptainer",
    )
