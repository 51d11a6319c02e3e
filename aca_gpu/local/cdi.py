"""A CDI specification for Podman (`--device nvidia.com/gpu=all`) made from this host's own files.

Podman passes GPUs through the Container Device Interface: a spec file under /etc/cdi names the
device nodes to create and the driver files to bind-mount. NVIDIA's `nvidia-ctk cdi generate`
writes one from NVML; this one is made from what is on disk (`/dev/nvidia*`, the driver libraries in
ldconfig's cache, nvidia-smi and friends), so a host with the driver but without the toolkit can
still run GPU containers. Device `N` is `/dev/nvidiaN` (the kernel minor number; on multi-GPU hosts
whose probe order differs from PCI order, `nvidia-smi -q | grep Minor` shows the mapping), and `all`
is every one of them. Driver files are mounted where every image finds them without an ldcache
hook: libraries into the multiarch directory the dynamic linker searches by default
(/usr/lib/x86_64-linux-gnu), binaries into /usr/bin, whatever the host's own layout (some hosts
keep them under /usr/local/nvidia).
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.local.gpus import CDI_KIND

CDI_VERSION = "0.5.0"
DEFAULT_PATH = "/etc/cdi/acagpu-nvidia.json"
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "bind"]
_GPU_NODE = re.compile(r"^nvidia(\d+)$")
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


def multiarch_dir(machine: str | None = None) -> str:
    """The library directory a Debian/Ubuntu-style image's dynamic linker searches by default."""
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
        (machine or platform.machine()).lower(), "x86_64"
    )
    return f"/usr/lib/{arch}-linux-gnu"


def _mounts(paths: Iterable[str], into: str) -> list[dict[str, Any]]:
    """Each path and, for a symlink, the file it names, mounted under `into` by file name."""
    mounts: dict[str, str] = {}
    for path in paths:
        for candidate in (path, os.path.realpath(path)):
            mounts.setdefault(f"{into}/{os.path.basename(candidate)}", candidate)
    return [{"hostPath": h, "containerPath": c, "options": list(MOUNT_OPTIONS)} for c, h in mounts.items()]


def build_spec(
    nodes: Iterable[str],
    libraries: Mapping[str, str],
    binaries: Mapping[str, str],
    *,
    machine: str | None = None,
) -> dict[str, Any]:
    """The spec for `nodes` (/dev/nvidia*), `libraries` ({soname: path}) and `binaries` ({name: path})."""
    gpus: dict[int, str] = {}
    control: list[str] = []
    for node in nodes:
        base = os.path.basename(node)
        match = _GPU_NODE.match(base)
        if match:
            gpus[int(match.group(1))] = node
        elif base in CONTROL_NODES:
            control.append(node)
    if not gpus:
        raise BadInput("no /dev/nvidiaN device node on this host: there is no GPU for a CDI spec to describe")
    devices: list[dict[str, Any]] = [
        {"name": str(index), "containerEdits": {"deviceNodes": [{"path": gpus[index]}]}}
        for index in sorted(gpus)
    ]
    devices.append(
        {"name": "all", "containerEdits": {"deviceNodes": [{"path": gpus[i]} for i in sorted(gpus)]}}
    )
    edits: dict[str, Any] = {"deviceNodes": [{"path": node} for node in sorted(control)]}
    mounts = _mounts(sorted(libraries.values()), multiarch_dir(machine)) + _mounts(
        sorted(binaries.values()), "/usr/bin"
    )
    if mounts:
        edits["mounts"] = mounts
    return {"cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": devices, "containerEdits": edits}


def write_spec(spec: Mapping[str, Any], path: str = DEFAULT_PATH) -> str:
    """Write it (JSON, which every CDI reader accepts) atomically; returns the path."""
    target = Path(path)
    if target.suffix not in (".json",):
        raise BadInput(f"the CDI spec path must end in .json, got {path}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc} (CDI specs usually need root)") from None
    return str(target)
