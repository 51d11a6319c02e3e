"""A job's or served app's own container, run for real by Podman on this machine (no GPU: the
command is what matters).

Jobs that are neither the gpu-tester nor the guard (a user's `acagpu run`) run their image and
command in a real container when Podman is here and the image is in its local storage, so exit
codes, stdout/stderr, env vars and secrets are real; so does a served app's replica (external
ingress), its ports published on loopback for the emulator's ingress. ACA's `command` replaces the image's
entrypoint and `args` its CMD, as Podman's `--entrypoint` and trailing arguments do. Otherwise the
container says in its first console line why it was simulated instead. Env values reach Podman
through its own environment (`-e NAME`), never on its command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from aca_gpu.emulator.workloads.base import ContainerSpec
from aca_gpu.emulator.workloads.container import SandboxContainer

ENV_SWITCH = "ACAGPU_EMULATOR_CONTAINERS"  # auto (default): Podman when usable; off: always simulate
_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")
# whether podman has an image, asked once per image a few seconds: a fan-out starts many executions
# of one image, and each `podman image exists` costs ~25 ms of CPU (benchmarks/emulator_executions.py)
EXISTS_TTL_S = 5.0
_EXISTS: dict[tuple[str, str], tuple[bool, float]] = {}


def podman_binary() -> str | None:
    if os.environ.get(ENV_SWITCH, "auto").lower() in ("off", "simulated", "0", "false"):
        return None
    return shutil.which("podman")


def why_not(spec: ContainerSpec) -> str | None:
    """None when Podman can run the job's image here; else the reason, for the console."""
    binary = podman_binary()
    if binary is None:
        if os.environ.get(ENV_SWITCH, "auto").lower() in ("off", "simulated", "0", "false"):
            return f"real containers are off ({ENV_SWITCH})"
        return "podman is not installed on the emulator's machine"
    known = _EXISTS.get((binary, spec.image))
    if known is not None and time.monotonic() - known[1] < EXISTS_TTL_S:
        present = known[0]
    else:
        try:
            found = subprocess.run(
                [binary, "image", "exists", spec.image], capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"podman did not answer ({type(exc).__name__})"
        present = found.returncode == 0
        _EXISTS[(binary, spec.image)] = (present, time.monotonic())
    if not present:
        return f"image {spec.image} is not in podman's local storage (`podman pull {spec.image}` first)"
    return None


CONTAINER_PREFIX = "acagpu-emu-"


def podman_argv(
    binary: str, spec: ContainerSpec, name: str, storages: Path | None = None, extra: Sequence[str] = ()
) -> list[str]:
    argv = [binary, "run", "--rm", "--name", name, "--pull", "never", *extra]
    for key in spec.env:
        argv += ["-e", key]
    for storage, path, read_only in spec.mounts:  # an Azure Files share: a folder that outlives the run
        assert storages is not None
        folder = storages / _NAME.sub("-", storage)
        folder.mkdir(parents=True, exist_ok=True)
        argv += ["-v", f"{folder}:{path}" + (":ro" if read_only else "")]
    rest: list[str] = list(spec.args)
    if spec.command:
        argv += ["--entrypoint", json.dumps(list(spec.command))]
    return [*argv, spec.image, *rest]


def container_name(spec: ContainerSpec) -> str:
    """`acagpu-emu-<server pid>-<replica>`: two emulators on one host (two shells, two test runs)
    share Podman's storage, and each tells its own containers from the other's by its pid."""
    return f"{CONTAINER_PREFIX}{os.getpid()}-" + _NAME.sub("-", spec.replica)[:44]


def run_in_podman(
    container: SandboxContainer,
    spec: ContainerSpec,
    env: Mapping[str, str],
    storages: Path,
    extra: Sequence[str] = (),
) -> None:
    """Start the job's container; `stop()` removes it (killing the client alone would not).
    `storages` holds one folder per environment storage, mounted where the template says; `extra`:
    more `podman run` options."""
    binary = podman_binary()
    assert binary is not None
    name = container_name(spec)
    outside = {**os.environ, **dict(env)}  # podman reads each `-e NAME` from its own environment

    def remove() -> None:
        subprocess.run(
            [binary, "rm", "-f", "--time", "0", name], capture_output=True, timeout=60, check=False
        )
        kill_leftovers(name)

    container.on_stop(remove)
    container.run_streams(podman_argv(binary, spec, name, storages, extra), outside)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_in_podman(
    container: SandboxContainer, spec: ContainerSpec, env: Mapping[str, str], storages: Path
) -> None:
    """A served app's container in Podman (its image's own entrypoint, or the template's command):
    a network of its own, as an ACA replica has, its hostname the replica's name, and its target and
    probe ports published on free loopback ports (`container.published`), where the ingress sends
    requests and probes. The server in it must listen on 0.0.0.0, as on ACA."""
    ports = sorted({spec.ingress_port, *spec.probe_ports} - {0})
    container.published = {port: free_port() for port in ports}
    extra = ["--hostname", spec.replica[:63]]
    for port, outside in container.published.items():
        extra += ["-p", f"127.0.0.1:{outside}:{port}"]
    run_in_podman(container, spec, env, storages, extra)


def kill_leftovers(name: str) -> list[int]:
    """Kill what a container stopped mid-create left on the host: its `conmon` and the `runc init`
    under it. A `podman run` killed between runc's create and start leaves both (conmon re-parented
    to init, runc init waiting for a start that never comes) while `podman rm -f` finds no
    container and `podman ps -a` lists none. Found by the container's exact name on conmon's own
    command line (`-n NAME`): only this replica's processes. Returns the pids killed."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    conmons: list[tuple[int, str | None]] = []
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        with contextlib.suppress(ValueError, IndexError):
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        words = [w.decode(errors="replace") for w in argv]
        if not words or not words[0].endswith("conmon") or name not in words:
            continue
        at = words.index(name)
        if at == 0 or words[at - 1] != "-n":
            continue
        ident = words[words.index("-c") + 1] if "-c" in words[:-1] else None
        conmons.append((int(entry.name), ident))
    killed: list[int] = []
    runc = shutil.which("runc")
    for pid, ident in conmons:
        if runc is not None and ident:  # runc's own delete kills `runc init` and frees its cgroup
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    [runc, "delete", "--force", ident], capture_output=True, timeout=10, check=False
                )
        for child in [c for c, parent in parents.items() if parent == pid] + [pid]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
                killed.append(child)
    return killed
