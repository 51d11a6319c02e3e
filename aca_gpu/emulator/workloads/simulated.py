"""The simulated fleet: GPU replicas without a GPU.

Each container gets a sandbox directory whose `bin/` (first in PATH) holds an `nvidia-smi` shim that
renders the replica's GPUs in the driver's real layout, so exec runs real processes (`sh` reading
stdin, real `$?`) and nvidia-smi inside them answers like the real thing. Main processes are played,
not run: an explorer idles, the gpu-tester prints a datasheet-based run, a job whose image is in
this machine's Podman storage runs for real in Podman (`podman.py`: a user's `acagpu run`), a job
whose command is a `sh -c` line runs it for real in the sandbox (as exec does), any other job
prints one line saying it was simulated and why it was not run, and exits 0, except the acagpu
guard (a stdlib script injected into a stock Python image), which runs for real against the
emulator with its job's managed identity. An image whose CUDA requirement is newer than the driver
does not start at all.
"""

from __future__ import annotations

import itertools
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import aca_gpu
from aca_gpu.emulator.banner import cuda_banner
from aca_gpu.emulator.timing import grace_wall_seconds
from aca_gpu.emulator.workloads import netns
from aca_gpu.emulator.workloads.base import ContainerSpec, StartFailure
from aca_gpu.emulator.workloads.container import SandboxContainer
from aca_gpu.emulator.workloads.cuda_versions import max_cuda_for_driver, start_failure
from aca_gpu.emulator.workloads.fleet import DEFAULT_DRIVER, gpus_for, profile_for
from aca_gpu.emulator.workloads.podman import run_in_podman, serve_in_podman, why_not
from aca_gpu.emulator.workloads.smi_health import sicken
from aca_gpu.emulator.workloads.smi_render import CONFIG_ENV, SmiGpu, SmiHost
from aca_gpu.emulator.workloads.tester_sim import result_grace_s, simulate, simulate_cpu_only

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")
OTHER_JOB_SECONDS = 2.0  # a generic job's realistic run time before it exits 0
SECONDS_ENV, EXIT_CODE_ENV = "ACAGPU_EMULATOR_SECONDS", "ACAGPU_EMULATOR_EXIT_CODE"  # a played job's outcome
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_counter = itertools.count()


def replica_folder(workdir: Path, spec: ContainerSpec, *subfolders: str) -> Path:
    """A replica's own folder under the server's work directory, with `subfolders` made in it (the
    workloads remove it when the container stops: see their `on_stop`)."""
    root = workdir / f"{_SAFE.sub('-', spec.replica)}-{_SAFE.sub('-', spec.name)}-{next(_counter)}"
    for name in subfolders:
        (root / name).mkdir(parents=True, exist_ok=True)
    return root


def is_guard(spec: ContainerSpec) -> bool:
    """The guard job (`acagpu guard install`): its zero-build env var carries the script."""
    return "ACAGPU_GUARD_SRC" in spec.env


def is_gpu_tester(spec: ContainerSpec) -> bool:
    """The tester job: its zero-build env var, or a command line that names the tester script."""
    return "ACAGPU_TESTER_SRC" in spec.env or any("gpu_tester" in part for part in spec.command + spec.args)


def simulated_outcome(env: Mapping[str, str], seconds: float) -> tuple[float, int]:
    """(emulated seconds, exit code) of a job played rather than run: `ACAGPU_EMULATOR_SECONDS` and
    `ACAGPU_EMULATOR_EXIT_CODE` in its env override them (a benchmark's failing or slow shard)."""
    try:
        seconds = float(env.get(SECONDS_ENV, seconds))
        code = int(env.get(EXIT_CODE_ENV, "0"))
    except ValueError:
        return seconds, 0
    return max(0.0, seconds), code


def sandbox_mounts(spec: ContainerSpec, env: dict[str, str], argv: list[str], storages: Path) -> list[str]:
    """A `sh -c` line without a container: each mount path, in the env's values (`ACAGPU_OUTPUT_DIR`)
    and in the command line, is rewritten to its share's folder on this machine, the folder a Podman
    run would mount and the file data plane serves; `env` is changed in place, the argv returned."""
    for storage, path, _read_only in spec.mounts:
        folder = storages / re.sub(r"[^a-zA-Z0-9_.-]+", "-", storage)
        folder.mkdir(parents=True, exist_ok=True)
        mount = path.rstrip("/") or "/"
        # the path as a shell word reads it: not inside another path (`/srv/data`, `~/data`, `/database`)
        # and whatever ends it (`/data/x`, `/data;`, `(ls /data)`, `/data|wc`, `"/data"`)
        pattern = re.compile(r"(?<![\w./~}-])" + re.escape(mount) + r"(?![\w.~-])")
        for name, value in list(env.items()):
            if value == mount or value.startswith(mount + "/"):
                env[name] = str(folder) + value[len(mount) :]
        literal = str(folder).replace("\\", "\\\\")  # a replacement template: backslashes doubled
        argv = [pattern.sub(literal, part) for part in argv]
    return argv


def is_shell_line(spec: ContainerSpec) -> bool:
    """`sh -c '...'` (or bash): a command line the sandbox can run as it is."""
    argv = list(spec.command + spec.args)
    return len(argv) >= 3 and argv[0] in SHELLS and argv[1] == "-c"


def _shim(smi_config: Path) -> str:
    package_root = Path(aca_gpu.__file__).resolve().parent.parent
    return (
        f"#!{sys.executable}\n"
        '"""nvidia-smi of an emulated replica: renders its GPUs in the host driver\'s real layout."""\n'
        "import os, sys\n"
        f"sys.path.insert(0, {str(package_root)!r})\n"
        "from aca_gpu.emulator.workloads.smi_render import main\n"
        f"os.environ.setdefault({CONFIG_ENV!r}, {str(smi_config)!r})\n"
        "sys.exit(main())\n"
    )


SERVED_MEMORY_FRACTION = 0.3  # a served model's simulated footprint: UNCONFIRMED (docs/emulator.md)


def loaded(gpus: tuple[SmiGpu, ...]) -> tuple[SmiGpu, ...]:
    """A served replica's simulated GPUs with a model's weights in memory, so `serve`'s look at
    nvidia-smi finds the GPU in use; the `cpu_fallback` fault leaves them idle instead."""
    return tuple(replace(g, memory_used_mib=int(g.memory_total_mib * SERVED_MEMORY_FRACTION)) for g in gpus)


def serve_for_real(
    container: SandboxContainer, spec: ContainerSpec, bin_dir: Path | None = None, *, isolate: bool = False
) -> None:
    """A served app's main process, for real: `python`/`python3` is this interpreter (a stock Python
    image's), found first in PATH. With `isolate` it gets a network of its own where this machine
    allows one (netns.py: two replicas on one port do not collide, and the ingress reaches it through
    `container.endpoint`); else it shares this machine's network (docs/emulator.md says so)."""
    argv = list(spec.command + spec.args)
    here = str(Path(sys.executable).parent)
    front = f"{bin_dir}:{here}" if bin_dir is not None else here
    container.env["PATH"] = f"{front}:{container.env.get('PATH', BASE_PATH)}"
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    exe = shutil.which(argv[0], path=container.env["PATH"]) if "/" not in argv[0] else argv[0]
    if exe is None:
        container.fail_to_run(f'exec: "{argv[0]}": executable file not found in $PATH')
        return
    wrapped = netns.isolated([exe, *argv[1:]], (spec.ingress_port, *spec.probe_ports)) if isolate else None
    if wrapped is None:
        container.run_process([exe, *argv[1:]])
        return
    command, folder = wrapped
    container.endpoint = str(folder)
    container.on_stop(lambda: shutil.rmtree(folder, ignore_errors=True))
    container.run_process(command)


class SimulatedWorkload:
    """Implements the `Workload` protocol with emulated GPUs on the host's own userland."""

    kind = "simulated"

    def __init__(self, *, driver_version: str | None = None, workdir: Path) -> None:
        self.driver_version = driver_version or DEFAULT_DRIVER
        self.workdir = workdir

    def gpu_name(self, profile_type: str) -> str | None:
        gpus = gpus_for(profile_type, "probe")
        return gpus[0].name if gpus else None

    def start(self, spec: ContainerSpec, *, time_scale: float) -> SandboxContainer:
        gpus = gpus_for(spec.profile_type, spec.replica)
        if gpus and spec.gpu_health:
            gpus = sicken(gpus, spec.gpu_health)
        if gpus and spec.kind == "app" and spec.ingress_port and not spec.gpu_idle:
            gpus = loaded(gpus)  # a served model holds its weights in GPU memory (UNCONFIRMED figure)
        if gpus:
            message = start_failure(spec.image, spec.env, driver=self.driver_version, brand=gpus[0].brand)
            if message is not None:
                raise StartFailure("ContainerCreateFailure", message)
        root = replica_folder(self.workdir, spec, "home", "bin", "tmp")
        home, bin_dir, tmp = root / "home", root / "bin", root / "tmp"
        env = dict(spec.env)
        # a container's /tmp goes with it: what its processes leave there (the zero-build scripts'
        # mkdtemp folders) is removed when the replica stops, not left on this machine per execution
        env.update(HOME=str(home), HOSTNAME=spec.replica, TMPDIR=str(tmp))
        env["PATH"] = f"{bin_dir}:{spec.env.get('PATH', BASE_PATH)}"
        hidden: tuple[str, ...] = ()
        if gpus:
            smi_config = root / "nvidia-smi.json"
            smi_config.write_text(SmiHost(self.driver_version, gpus).to_json(), encoding="utf-8")
            shim = bin_dir / "nvidia-smi"
            shim.write_text(_shim(smi_config), encoding="utf-8")
            shim.chmod(0o755)
            env.update(NVIDIA_VISIBLE_DEVICES=",".join(g.uuid for g in gpus))
        else:
            hidden = ("nvidia-smi",)  # no GPU, no driver utilities mounted into the container
        container = SandboxContainer(name=spec.name, env=env, cwd=home, hidden=hidden)
        container.on_stop(lambda: shutil.rmtree(root, ignore_errors=True))
        scale = max(0.0, time_scale)
        grace = result_grace_s(spec.env)  # the tester's stay after its result, on the scaled clock
        if spec.kind == "job" and gpus and is_gpu_tester(spec):
            profile = profile_for(spec.profile_type)
            script, _ = simulate(
                gpus,
                driver=self.driver_version,
                driver_cuda=max_cuda_for_driver(self.driver_version),
                vcpu=profile.vcpu if profile else 8,
                host=spec.replica,
                result_grace_s=grace,
            )
            container.play(
                [(delay * scale, line) for delay, line in script], 0, grace_wall_seconds(grace, scale)
            )
        elif spec.kind == "job" and is_gpu_tester(spec):
            script, _ = simulate_cpu_only(vcpu=4, host=spec.replica, result_grace_s=grace)
            container.play(
                [(delay * scale, line) for delay, line in script], 1, grace_wall_seconds(grace, scale)
            )
        elif spec.kind == "job" and is_guard(spec):
            # a stock Python image's `python3`: this interpreter (the script needs only the stdlib)
            container.env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:{BASE_PATH}"
            container.run_process(list(spec.command + spec.args))
        elif spec.kind == "job" and (unreal := why_not(spec)) is None:
            run_in_podman(container, spec, spec.env, self.workdir / "storages")
        elif spec.kind == "job" and is_shell_line(spec):
            argv = list(spec.command + spec.args)
            if spec.mounts:  # the sandbox shares this machine's file system: no mount point of its own
                argv = sandbox_mounts(spec, container.env, argv, self.workdir / "storages")
                container.emit(
                    "acagpu emulator: no container here (Podman); mount paths point at the shares' folders",
                    "stderr",
                )
            # a shell line (the nvidia-smi probe, a user's command) runs for real in the sandbox, as
            # exec does: its nvidia-smi is the replica's shim, its output and exit status are real,
            # and stdout and stderr stay apart as a container runtime keeps them
            container.run_streams(argv, container.env)
        elif spec.kind == "app" and spec.ingress_port and why_not(spec) is None:
            # a served app whose image Podman has: its container for real, its ports published
            serve_in_podman(container, spec, spec.env, self.workdir / "storages")
        elif spec.kind == "app" and spec.ingress_port and (spec.command or spec.args):
            # a served app (external ingress): its command runs for real in the sandbox and listens
            # on the host's loopback, where the emulator's ingress forwards (emulator/ingress/)
            serve_for_real(container, spec, bin_dir, isolate=True)
        elif spec.kind == "job":
            argv = list(spec.command + spec.args)
            seconds = OTHER_JOB_SECONDS
            if (
                len(argv) == 2
                and argv[0] in ("sleep", "/bin/sleep")
                and argv[1].replace(".", "", 1).isdigit()
            ):
                seconds = float(argv[1])
            shown = shlex.join(argv) if argv else spec.image
            seconds, code = simulated_outcome(spec.env, seconds)
            done = "completed" if code == 0 else f"exited {code}"
            # the one line says it was not run, and why (no Podman, or the image is not there)
            container.play([(seconds * scale, f"{shown}: {done} (simulated run; not run: {unreal})")], code)
        else:
            for line in cuda_banner(spec.image, gpu=bool(gpus)):  # the image's entrypoint, then idle
                container.emit(line)
            container.idle()
        return container
