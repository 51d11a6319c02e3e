"""Recognise what GPU container runtimes print when a GPU container fails, and say how to fix it.

Docker with the NVIDIA Container Toolkit, Podman with CDI, Apptainer with `--nv` and the CUDA
programs inside them fail with a handful of texts that users paste into issues again and again.
`recognise(text)` scans a log (a command's stderr, a pasted terminal session) and returns one
`RuntimeFinding` per kind of failure found, in the order they first appear, each with the line
that proves it and the fix. Pure: no I/O, linear in the input (line scans and simple patterns),
never raises on odd input.

A container that crashed at start is told too: out of memory (OOMKilled) and a program built for
another CPU architecture (exec format error) are in `recognise`; `killed(code)` reads exit 137
when nothing was printed. An image that could not be pulled is `image_pull(text)`, kept out of
`recognise` because it is no GPU finding: callers turn it into bad input or an infrastructure
error (the registry could not be reached) rather than a verdict on the GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.gpu.cuda_compat import min_driver_for_cuda

# finding kinds (stable identifiers: they appear in JSON documents)
DOCKER_NO_GPU_DRIVER = "docker-no-gpu-driver"
DOCKER_NO_NVIDIA_RUNTIME = "docker-no-nvidia-runtime"
DOCKER_ENGINE_DOWN = "docker-engine-down"
CUDA_REQUIREMENT = "cuda-requirement-unsatisfied"
NVML_MISMATCH = "nvml-driver-library-mismatch"
NVML_UNKNOWN = "nvml-unknown-error"
LIBCUDA_MISSING = "libcuda-not-found"
NO_CUDA_DEVICE = "no-cuda-device"
HOST_DRIVER_LIBRARY_MISSING = "host-driver-library-missing"
APPTAINER_NO_NV_FILES = "apptainer-no-nv-files"
CDI_UNRESOLVABLE = "cdi-device-unresolvable"
NVIDIA_SMI_NOT_IN_CONTAINER = "nvidia-smi-not-in-container"
DRIVER_NOT_LOADED = "driver-not-loaded"
NO_DEVICES = "no-devices-found"
DRIVER_TOO_OLD = "driver-too-old-for-runtime"
NO_KERNEL_IMAGE = "no-kernel-image-for-gpu"
OUT_OF_MEMORY = "out-of-memory"
EXEC_FORMAT = "exec-format-error"
RUNTIME_NETWORK = "runtime-network-setup"
KILLED = "killed"
IMAGE_PULL_FAILED = "image-pull-failed"
REGISTRY_UNREACHABLE = "image-registry-unreachable"
SIGKILL_EXIT = 137  # 128 + 9: what a container killed by the out-of-memory killer exits with

# kinds that mean the GPU never reached the container (as opposed to a driver/image mismatch)
GPU_NOT_PASSED_IN = frozenset(
    {
        DOCKER_NO_GPU_DRIVER,
        DOCKER_NO_NVIDIA_RUNTIME,
        HOST_DRIVER_LIBRARY_MISSING,
        LIBCUDA_MISSING,
        NO_CUDA_DEVICE,
        APPTAINER_NO_NV_FILES,
        CDI_UNRESOLVABLE,
        NVIDIA_SMI_NOT_IN_CONTAINER,
        DRIVER_NOT_LOADED,
        NO_DEVICES,
    }
)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_REQUIRE = re.compile(r"unsatisfied condition:\s*cuda\s*>=\s*(\d+\.\d+)", re.IGNORECASE)
_CDI_DEVICES = re.compile(r"unresolvable CDI devices?\s+([^\s:]+(?:,\s*[^\s:]+)*)", re.IGNORECASE)
_DRIVER_NAME = re.compile(r'could not select device driver\s+"([^"]*)"', re.IGNORECASE)
_MAX_EVIDENCE = 300
# runc nests the hook's stderr in quoted strings: runs of backslashes before n or a quote
_ESCAPES = re.compile(r'\\+[n"]|"+\s*$')
# what Docker, Podman, Apptainer and ACA's system events say when an image cannot be pulled
PULL_MARKERS = (
    "did not resolve to an alias",
    "initializing source",
    "manifest unknown",
    "pull access denied",
    "repository does not exist",
    "unable to find image",
    "requested access to the resource is denied",
    "reading manifest",
    "failed to get checksum",
    "unable to handle docker://",
    "imagepullfailure",  # ACA: "terminated with exit code '' and reason 'ImagePullFailure'"
    "errimagepull",
    "imagepullbackoff",
    "failed to pull image",
    "persistent image pull errors",
)
# ... and when the registry could not be reached (or turned the pull away for now): retry later
UNREACHABLE_MARKERS = (
    "dial tcp",
    "connection refused",
    "i/o timeout",
    "tls handshake",
    "no such host",
    "toomanyrequests",
    "too many requests",
)
# runc and crun: the program could not be executed at all, before it printed anything
_EXEC_FAILED = re.compile(r"^(exec \S.*|.*exec user process caused.*): exec format error$", re.IGNORECASE)

# what to do about an image that could not be pulled, where it was pulled: this host's runtime
# logs in with `podman login`/`docker login`; ACA pulls with the job's registry settings
PULL_NAMED = "name the image in full (docker.io/nvidia/cuda:TAG) and check that the tag exists"
PULL_FIX = f"{PULL_NAMED}; a private registry needs credentials (`podman login` or `docker login` here)"
ACA_PULL_FIX = (
    f"{PULL_NAMED}; ACA pulls a private registry's image with --registry-identity, or with "
    "--registry-username and --registry-password-env"
)


@dataclass(frozen=True)
class RuntimeFinding:
    """One recognised failure: what it means, how to fix it, and the line that shows it."""

    kind: str
    summary: str
    fix: str
    evidence: str
    gpu: bool = True  # a GPU/driver/toolkit problem (exit 5); False: the runtime itself (exit 2)
    details: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_absent(self) -> bool:
        """True when this failure means no GPU was visible in the container at all."""
        return self.kind in GPU_NOT_PASSED_IN

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "fix": self.fix,
            "evidence": self.evidence,
            "gpu": self.gpu,
            "details": dict(self.details),
        }


def _clip(line: str) -> str:
    """The evidence: the line from the hook's own `stderr:` on, without runc's escaped wrappers."""
    text = line.strip()
    at = text.rfind("stderr: ")
    if at > 0:
        text = text[at + len("stderr: ") :]
    text = " ".join(_ESCAPES.sub(" ", text).split())
    return text if len(text) <= _MAX_EVIDENCE else text[: _MAX_EVIDENCE - 1] + "…"


def _docker_no_driver(line: str, low: str) -> RuntimeFinding | None:
    if "could not select device driver" not in low:
        return None
    match = _DRIVER_NAME.search(line)
    name = match.group(1) if match else ""
    return RuntimeFinding(
        DOCKER_NO_GPU_DRIVER,
        "Docker has no GPU device driver: the NVIDIA Container Toolkit is not installed, or Docker was "
        "not restarted after it was" + (f' (driver "{name}" requested)' if name else ""),
        "install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` "
        "and `sudo systemctl restart docker` (Docker from snap needs the snap's own GPU support)",
        _clip(line),
        details={"driver": name},
    )


def _docker_no_runtime(line: str, low: str) -> RuntimeFinding | None:
    if "unknown or invalid runtime name: nvidia" not in low:
        return None
    return RuntimeFinding(
        DOCKER_NO_NVIDIA_RUNTIME,
        "Docker does not know the `nvidia` runtime: it is not registered in /etc/docker/daemon.json",
        "run `sudo nvidia-ctk runtime configure --runtime=docker` and restart Docker, or use "
        "`--gpus all` without `--runtime=nvidia`",
        _clip(line),
    )


def _docker_engine_down(line: str, low: str) -> RuntimeFinding | None:
    if "cannot connect to the docker daemon" not in low:
        return None
    return RuntimeFinding(
        DOCKER_ENGINE_DOWN,
        "no Docker engine answers: the docker client is installed but the daemon is not running or "
        "not reachable from this user",
        "start it (`sudo systemctl start docker`), add yourself to the `docker` group, or use "
        "`--runtime podman`",
        _clip(line),
        gpu=False,
    )


def _cuda_requirement(line: str, low: str) -> RuntimeFinding | None:
    if "unsatisfied condition" not in low:
        return None
    match = _REQUIRE.search(line)
    cuda = match.group(1) if match else None
    minimum = min_driver_for_cuda(cuda) if cuda else None
    need = f"CUDA {cuda}" if cuda else "a newer CUDA"
    fix = (
        f"install NVIDIA driver {minimum} or newer on the host, or use an image built for an older CUDA"
        if minimum
        else "install a newer NVIDIA driver on the host, or use an image built for an older CUDA"
    )
    details = {"cuda": cuda} if cuda else {}
    if minimum:
        details["min_driver"] = minimum
    return RuntimeFinding(
        CUDA_REQUIREMENT,
        f"the image requires {need} (NVIDIA_REQUIRE_CUDA) and the host driver is older, so the NVIDIA "
        "runtime refused to start the container",
        fix + " (NVIDIA_DISABLE_REQUIRE=true skips the check only where forward-compat libraries exist)",
        _clip(line),
        details=details,
    )


def _nvml_mismatch(line: str, low: str) -> RuntimeFinding | None:
    if "driver/library version mismatch" not in low:
        return None
    return RuntimeFinding(
        NVML_MISMATCH,
        "the NVML library in use differs from the loaded NVIDIA kernel module: the driver was updated "
        "without a reboot, or the image carries its own driver libraries",
        "reboot the host (or unload and reload the nvidia kernel modules); never bake libnvidia-ml or "
        "libcuda into an image: the runtime mounts the host's",
        _clip(line),
    )


def _nvml_unknown(line: str, low: str) -> RuntimeFinding | None:
    if "failed to initialize nvml: unknown error" not in low:
        return None
    return RuntimeFinding(
        NVML_UNKNOWN,
        "NVML cannot reach the GPU from inside the container: its device access was lost (typically "
        "after `systemctl daemon-reload` on a systemd cgroup host) or the device nodes are missing",
        "restart the container; for a lasting fix use CDI (`nvidia-ctk cdi generate`) or pass the "
        "/dev/nvidia* device nodes explicitly",
        _clip(line),
    )


def _libcuda_missing(line: str, low: str) -> RuntimeFinding | None:
    if "libcuda.so" not in low or not ("unable to find" in low or "cannot open shared object" in low):
        return None
    return RuntimeFinding(
        LIBCUDA_MISSING,
        "the CUDA driver library (libcuda.so) is not in the container: the GPU was not passed in",
        "Apptainer: add `--nv` after `exec`/`run`; Docker: `--gpus all`; Podman: "
        "`--device nvidia.com/gpu=all` (with a CDI spec)",
        _clip(line),
    )


def _no_cuda_device(line: str, low: str) -> RuntimeFinding | None:
    if "no cuda-capable device is detected" not in low:
        return None
    in_hook = "nvidia-container-cli" in low
    return RuntimeFinding(
        NO_CUDA_DEVICE,
        "CUDA found no GPU"
        + (
            " while the NVIDIA runtime prepared the container"
            if in_hook
            else ": none is visible to the process"
        ),
        "check `nvidia-smi` on the host; in the container request the GPU (`--gpus all`, `--nv`, "
        "`--device nvidia.com/gpu=all`) and check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES; under "
        "Slurm request one with `--gres=gpu:1`",
        _clip(line),
    )


def _host_library_missing(line: str, low: str) -> RuntimeFinding | None:
    if "load library failed" not in low or "libnvidia-ml" not in low:
        return None
    return RuntimeFinding(
        HOST_DRIVER_LIBRARY_MISSING,
        "the NVIDIA runtime cannot load libnvidia-ml on the host: no NVIDIA driver is installed there "
        "(or the toolkit runs where the driver is not, e.g. inside another container)",
        "install the NVIDIA driver on the host and check `nvidia-smi` there first",
        _clip(line),
    )


def _apptainer_no_nv(line: str, low: str) -> RuntimeFinding | None:
    if "could not find any nv files on this host" not in low:
        return None
    return RuntimeFinding(
        APPTAINER_NO_NV_FILES,
        "`--nv` found no NVIDIA driver files on this host: this node has no driver (not a GPU node, "
        "or no GPU allocated), or ldconfig's cache does not list the driver libraries",
        "run on a GPU node (Slurm: `--gres=gpu:1`), check `nvidia-smi` and `ldconfig -p | grep "
        "libnvidia-ml` there",
        _clip(line),
    )


def _cdi_unresolvable(line: str, low: str) -> RuntimeFinding | None:
    if "unresolvable cdi device" not in low:
        return None
    match = _CDI_DEVICES.search(line)
    devices = match.group(1) if match else ""
    return RuntimeFinding(
        CDI_UNRESOLVABLE,
        "Podman has no CDI specification for the requested GPU"
        + (f" ({devices})" if devices else "")
        + ": no GPU can be passed to the container",
        "generate one: `sudo acagpu doctor --write-cdi` (or `sudo nvidia-ctk cdi generate "
        "--output=/etc/cdi/nvidia.yaml`), then `podman run --device nvidia.com/gpu=all ...`",
        _clip(line),
        details={"devices": devices} if devices else {},
    )


def _smi_not_in_container(line: str, low: str) -> RuntimeFinding | None:
    if "nvidia-smi" not in low:
        return None
    if not (
        "executable file not found" in low
        or "nvidia-smi: not found" in low
        or "nvidia-smi: command not found" in low
        or "nvidia-smi: no such file" in low
    ):
        return None
    return RuntimeFinding(
        NVIDIA_SMI_NOT_IN_CONTAINER,
        "no GPU visible in the container: nvidia-smi is not there, and the GPU runtime mounts it "
        "together with the driver, so no GPU was passed in",
        "Docker: `--gpus all` (NVIDIA Container Toolkit); Podman: `--device nvidia.com/gpu=all` with a "
        "CDI spec (`acagpu doctor --write-cdi`); Apptainer: `--nv`",
        _clip(line),
    )


def _driver_not_loaded(line: str, low: str) -> RuntimeFinding | None:
    if "couldn't communicate with the nvidia driver" not in low:
        return None
    return RuntimeFinding(
        DRIVER_NOT_LOADED,
        "the NVIDIA kernel driver is not loaded (or its device nodes are not in the container)",
        "on the host: check `lsmod | grep nvidia` and `nvidia-smi`; reinstall the driver for the "
        "running kernel (DKMS) or reboot",
        _clip(line),
    )


def _no_devices(line: str, low: str) -> RuntimeFinding | None:
    if "no devices were found" not in low:
        return None
    return RuntimeFinding(
        NO_DEVICES,
        "the driver is loaded but reports no GPU: none is attached, or all are hidden from this "
        "container or job",
        "check `nvidia-smi -L` on the host, the GPU request (`--gpus`, `--gres`), and NVIDIA_VISIBLE_DEVICES",
        _clip(line),
    )


def _driver_too_old(line: str, low: str) -> RuntimeFinding | None:
    if "driver version is insufficient for cuda runtime version" not in low and (
        "cudaerrorinsufficientdriver" not in low
    ):
        return None
    return RuntimeFinding(
        DRIVER_TOO_OLD,
        "the host driver is older than the CUDA runtime inside the image",
        "install a newer NVIDIA driver on the host, or use an image built for an older CUDA "
        "(`acagpu compat --image IMG --driver VER` shows which)",
        _clip(line),
    )


def _no_kernel_image(line: str, low: str) -> RuntimeFinding | None:
    if "no kernel image is available for execution on the device" not in low:
        return None
    return RuntimeFinding(
        NO_KERNEL_IMAGE,
        "the program in the image was not built for this GPU's architecture",
        "use a build of the framework that includes this GPU's compute capability (or PTX for it)",
        _clip(line),
    )


def _out_of_memory(line: str, low: str) -> RuntimeFinding | None:
    if "oomkilled" not in low and "memory cgroup out of memory" not in low:
        return None
    return RuntimeFinding(
        OUT_OF_MEMORY,
        "the container ran out of memory and was killed (OOMKilled)",
        "give it more memory (on ACA `--memory`, up to the replica's; locally the runtime's memory "
        "limit or the host's RAM) or make it use less (a smaller batch or model)",
        _clip(line),
        gpu=False,
    )


def _exec_format(line: str, low: str) -> RuntimeFinding | None:
    if "exec format error" not in low:
        return None
    return RuntimeFinding(
        EXEC_FORMAT,
        "the program could not be executed (exec format error): the image was built for another CPU "
        "architecture (arm64 on amd64), or the script lacks its #! line",
        "use the image built for this machine's architecture (ACA's GPUs are linux/amd64: "
        "`docker buildx build --platform linux/amd64`), or start the script with a #! line",
        _clip(line),
        gpu=False,
    )


_NETWORK_MARKERS = (
    "failed to find plugin",  # CNI: podman 4 on a host without containernetworking-plugins
    "netavark:",
    "error configuring network namespace",
    "unable to find network with name or id",
)


def _runtime_network(line: str, low: str) -> RuntimeFinding | None:
    if not any(marker in low for marker in _NETWORK_MARKERS):
        return None
    return RuntimeFinding(
        RUNTIME_NETWORK,
        "the container runtime could not set up the container's network (its network plugins are "
        "missing or misconfigured on this host); nothing of the image or the GPU was tried",
        "install the runtime's network plugins (Debian/Ubuntu: containernetworking-plugins, or "
        "netavark for podman 4+), or, for containers that need no network, set "
        '`netns = "none"` under [containers] in containers.conf',
        _clip(line),
        gpu=False,
    )


Rule = Callable[[str, str], RuntimeFinding | None]
RULES: tuple[Rule, ...] = (
    _docker_no_driver,
    _docker_no_runtime,
    _docker_engine_down,
    _cuda_requirement,
    _nvml_mismatch,
    _nvml_unknown,
    _host_library_missing,
    _libcuda_missing,
    _no_cuda_device,
    _apptainer_no_nv,
    _cdi_unresolvable,
    _smi_not_in_container,
    _driver_not_loaded,
    _no_devices,
    _driver_too_old,
    _no_kernel_image,
    _out_of_memory,
    _exec_format,
    _runtime_network,
)


def _lines(text: str) -> Iterable[str]:
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def recognise(text: str) -> list[RuntimeFinding]:
    """Every kind of known failure in `text`, once each, in order of first appearance."""
    found: dict[str, RuntimeFinding] = {}
    for line in _lines(text):
        low = line.lower()
        if not low.strip():
            continue
        for rule in RULES:
            finding = rule(line, low)
            if finding is not None and finding.kind not in found:
                found[finding.kind] = finding
                break
    return list(found.values())


def first(text: str) -> RuntimeFinding | None:
    """The first failure in `text`: what a one-line reason should name."""
    findings = recognise(text)
    return findings[0] if findings else None


def exec_failed(stderr_line: str) -> bool:
    """True when this line is the runtime's own word that the program could not be executed (runc,
    crun: `exec /app: exec format error`), not a running program's report of a child it failed to run."""
    return bool(_EXEC_FAILED.match(" ".join(stderr_line.split())))


def killed(exit_code: int | None) -> RuntimeFinding | None:
    """Exit 137 (128 + SIGKILL) with no word from the platform: most often the out-of-memory killer."""
    if exit_code != SIGKILL_EXIT:
        return None
    return RuntimeFinding(
        KILLED,
        "killed by SIGKILL, most often by the out-of-memory killer",
        "if it ran out of memory, give it more (on ACA `--memory`, up to the replica's; locally the "
        "runtime's memory limit or the host's RAM) or make it use less (a smaller batch or model)",
        "exit code 137",
        gpu=False,
        details={"exit_code": "137"},
    )


def image_pull(text: str) -> RuntimeFinding | None:
    """The image could not be pulled: IMAGE_PULL_FAILED (the image as named cannot be had: wrong
    name or tag, no access), or REGISTRY_UNREACHABLE when the registry could not be reached or
    refused for now (network, DNS, TLS, rate limit). The evidence is the last line that says so: a
    runtime retries and its final error comes last."""
    said = None
    for line in _lines(text):
        low = line.lower()
        if any(marker in low for marker in PULL_MARKERS):
            said = line
    if said is None:
        return None
    low = said.lower()
    if any(marker in low for marker in UNREACHABLE_MARKERS):
        return RuntimeFinding(
            REGISTRY_UNREACHABLE,
            "the image's registry could not be reached (or turned the pull away for now)",
            "check the network and the registry (and its rate limit), then retry",
            _clip(said),
            gpu=False,
        )
    return RuntimeFinding(
        IMAGE_PULL_FAILED,
        "the image could not be pulled: no such image or tag, or no access to it",
        PULL_FIX,
        _clip(said),
        gpu=False,
    )
