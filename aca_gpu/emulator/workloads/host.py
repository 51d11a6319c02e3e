"""The host workload: containers run on this machine for real, so a GPU box gives real numbers.

Exec runs real processes with the host's PATH (the real `nvidia-smi` when the driver is installed,
otherwise "executable file not found", like a container without the driver). A job's main process is
its real command and args with the template's env, so the zero-build tester (`python -c <bootstrap>`
with the script in an env var) runs unchanged; an explorer app idles. A replica on a GPU profile
gets GPUs of its own on a multi-GPU host (host_gpus.py): CUDA and its `nvidia-smi` see those alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from aca_gpu.emulator import catalog
from aca_gpu.emulator.workloads.base import ContainerSpec
from aca_gpu.emulator.workloads.container import SandboxContainer
from aca_gpu.emulator.workloads.host_gpus import GpuSeats, read_host_gpus, smi_wrapper
from aca_gpu.emulator.workloads.simulated import (
    is_gpu_tester,
    replica_folder,
    sandbox_mounts,
    serve_for_real,
)
from aca_gpu.emulator.workloads.tester_sim import GRACE_ENV, result_grace_s
from aca_gpu.resources import template_path

_PYTHONS = {"python", "python3"}


def _query_smi(field: str) -> list[str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={field}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


class HostWorkload:
    """Implements the `Workload` protocol on this machine's own GPU (if any) and tools."""

    kind = "host"

    def __init__(self, *, workdir: Path) -> None:
        self.workdir = workdir
        versions = _query_smi("driver_version")
        self.driver_version = versions[0] if versions else "n/a"
        names = _query_smi("name")
        self._gpu = names[0] if names else None
        self.seats = GpuSeats(read_host_gpus())

    def gpu_name(self, profile_type: str) -> str | None:
        return self._gpu if "gpu" in profile_type.lower() or "a100" in profile_type.lower() else None

    def start(self, spec: ContainerSpec, *, time_scale: float) -> SandboxContainer:
        root = replica_folder(self.workdir, spec, "tmp")
        tmp = root / "tmp"
        env = dict(os.environ)
        env.update(spec.env)
        env["PATH"] = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        # a container's /tmp goes with it: what its processes leave there (the zero-build scripts'
        # mkdtemp folders) is removed when the replica stops, as the simulated workload does
        env.update(HOSTNAME=spec.replica, TMPDIR=str(tmp))
        seat = (
            self.seats.take(spec.replica, max(1, catalog.gpus(spec.profile_type)))
            if self.gpu_name(spec.profile_type)
            else None
        )
        if seat is not None:  # its own GPUs: CUDA and the nvidia-smi first on its PATH see them alone
            env.update(seat.env())
            real = shutil.which("nvidia-smi", path=env["PATH"])
            if real is not None:
                smi_wrapper(root / "bin", real, seat)
                env["PATH"] = f"{root / 'bin'}{os.pathsep}{env['PATH']}"
        if spec.kind == "job" and is_gpu_tester(spec):
            # the zero-build launch runs `python3` from PATH: this interpreter (the one with torch);
            # the result grace passes on the emulator's scaled clock like every other duration
            env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}"
            env[GRACE_ENV] = f"{result_grace_s(env) * max(0.0, time_scale):g}"
        container = SandboxContainer(name=spec.name, env=env, cwd=root)
        container.on_stop(lambda: shutil.rmtree(root, ignore_errors=True))
        if seat is not None:
            container.notice = seat.notice(len(self.seats.gpus))
            container.on_stop(lambda: self.seats.give_back(spec.replica))
        if spec.kind == "app" and spec.ingress_port and (spec.command or spec.args):
            serve_for_real(container, spec)  # a served model on this host's GPU, behind the ingress
            return container
        if spec.kind != "job":
            container.idle()
            return container
        argv = list(spec.command + spec.args)
        if not spec.command and is_gpu_tester(spec):
            argv = [sys.executable, str(template_path("gpu-tester", "gpu_tester.py")), *spec.args]
        if not argv:
            container.fail_to_run(
                "no command to run: the image's default entrypoint is not known on the host"
            )
            return container
        if argv[0] in _PYTHONS:
            argv[0] = sys.executable
        exe = shutil.which(argv[0], path=env["PATH"]) if os.sep not in argv[0] else argv[0]
        if exe is None or not os.access(exe, os.X_OK):
            container.fail_to_run(
                f'exec: "{argv[0]}": executable file not found in $PATH'
                if os.sep not in argv[0]
                else f'exec: "{argv[0]}": stat {argv[0]}: no such file or directory'
            )
            return container
        if spec.mounts:  # no container: a mount path in the env and the line means the share's folder
            argv = sandbox_mounts(spec, container.env, argv, self.workdir / "storages")
        container.run_process([exe, *argv[1:]])
        return container
