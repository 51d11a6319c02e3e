"""Command lines for one container run on Docker, Podman or Apptainer, built in one place.

Values of the environment (the tester's compressed source is tens of kilobytes) never go on the
command line: Docker and Podman get `-e NAME` and read the value from their own environment,
Apptainer reads `APPTAINERENV_NAME`. So `ps` shows no payload and argv stays short.
Containers get no network (`--network none`): neither nvidia-smi nor the tester needs one; a user's
own workload (`acagpu run`) gets the runtime's default network, as `docker run` does.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aca_gpu.errors import BadInput
from aca_gpu.local.gpus import GpuRequest

RUNTIMES = ("docker", "podman", "apptainer")
PODMAN_HOOKS_DIR = "/usr/share/containers/oci/hooks.d"
SIF_SCHEMES = ("docker://", "docker-daemon:", "oras://", "library://", "shub://", "docker-archive:", "oci:")


@dataclass(frozen=True)
class ContainerCommand:
    """argv to run, the environment values it reads by name, and a name to remove it by."""

    runtime: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    name: str | None = None

    def display(self) -> str:
        """The command as a person would type it (environment values are not part of it)."""
        return shlex.join(self.argv)


def apptainer_image(image: str, sif: str | None = None) -> str:
    """An existing .sif as it is; OCI references through `docker://`, as Apptainer needs them."""
    if sif:
        return sif
    if image.endswith(".sif") or image.startswith(("/", "./")) or image.startswith(SIF_SCHEMES):
        return image
    return f"docker://{image}"


def container_command(
    runtime: str,
    image: str,
    command: Sequence[str],
    *,
    gpus: GpuRequest,
    env: Mapping[str, str] | None = None,
    binary: str | None = None,
    name: str | None = None,
    podman_gpu: str = "cdi",
    sif: str | None = None,
    network: bool = False,
    binds: Sequence[tuple[str, str, bool]] = (),
) -> ContainerCommand:
    """One `run --rm` of `image` with `command` and the GPUs asked for, for `runtime`; `binds` are
    (host folder, container path, read-only) mounts."""
    values = dict(env or {})
    exe = binary or runtime
    mounts = [f"{src}:{dst}" + (":ro" if ro else "") for src, dst, ro in binds]
    if runtime == "docker":
        argv = [exe, "run", "--rm", *([] if network else ["--network", "none"])]
        if name:
            argv += ["--name", name]
        argv += gpus.docker_args()
        for key in values:
            argv += ["-e", key]
        for mount in mounts:
            argv += ["-v", mount]
        return ContainerCommand(runtime, [*argv, image, *command], values, name)
    if runtime == "podman":
        argv = [exe, "run", "--rm", *([] if network else ["--network", "none"])]
        if name:
            argv += ["--name", name]
        if podman_gpu == "hook":
            visible = gpus.visible_devices()
            if visible is not None:
                argv += ["--hooks-dir", PODMAN_HOOKS_DIR, "--security-opt", "label=disable"]
                values.setdefault("NVIDIA_VISIBLE_DEVICES", visible)
        elif podman_gpu == "cdi":
            for device in gpus.cdi_devices():
                argv += ["--device", device]
        else:
            raise BadInput(f"podman GPU mode must be cdi or hook, got {podman_gpu!r}")
        for key in values:
            argv += ["-e", key]
        for mount in mounts:
            argv += ["-v", mount]
        return ContainerCommand(runtime, [*argv, image, *command], values, name)
    if runtime == "apptainer":
        argv = [exe, "exec"]
        if not gpus.none:
            argv.append("--nv")
        for mount in mounts:
            argv += ["--bind", mount]
        outside = {f"APPTAINERENV_{key}": value for key, value in values.items()}
        if gpus.indices():
            outside["APPTAINERENV_CUDA_VISIBLE_DEVICES"] = ",".join(gpus.indices())
        return ContainerCommand(runtime, [*argv, apptainer_image(image, sif), *command], outside, None)
    raise BadInput(f"unknown runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")


def remove_command(runtime: str, name: str, binary: str | None = None) -> list[str] | None:
    """How to remove a named container left running (a timed-out run); Apptainer has none."""
    if runtime == "docker":
        return [binary or runtime, "rm", "-f", name]  # SIGKILL at once
    if runtime == "podman":
        return [binary or runtime, "rm", "-f", "--time", "0", name]  # no grace period before SIGKILL
    return None
