"""Facts about this machine's GPU stack, read with real commands and files; judged elsewhere.

Each function returns what it saw (text, paths, None when absent) and never raises for a missing
tool: `acagpu doctor` turns these facts into findings, and the CDI writer uses the same ones.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT = 20.0
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
PODMAN_HOOK_GLOB = "/usr/share/containers/oci/hooks.d/*nvidia*.json"
NVLIBLIST_PATHS = (
    "/etc/apptainer/nvliblist.conf",
    "/usr/local/etc/apptainer/nvliblist.conf",
    "/etc/singularity/nvliblist.conf",
    "/usr/local/etc/singularity/nvliblist.conf",
)
TOOLKIT_BINARIES = (
    "nvidia-ctk",
    "nvidia-container-runtime",
    "nvidia-container-runtime-hook",
    "nvidia-container-cli",
)
# the driver's user-space libraries a CUDA container needs (the NVIDIA runtime's compute+utility set)
DRIVER_LIBRARIES = (
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-ml.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libnvidia-cfg.so",
    "libnvidia-opencl.so",
    "libnvidia-gpucomp.so",
    "libnvidia-allocator.so",
    "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so",
)
DRIVER_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@dataclass(frozen=True)
class CommandOutput:
    """A command that was run: None exit code when it could not be started at all."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def run(argv: list[str], timeout: float = TIMEOUT) -> CommandOutput:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        return CommandOutput(tuple(argv), None, "", f"{argv[0]} did not answer within {exc.timeout:g} s")
    except OSError as exc:
        return CommandOutput(tuple(argv), None, "", str(exc))
    return CommandOutput(tuple(argv), done.returncode, done.stdout, done.stderr)


def host_nvidia_smi() -> CommandOutput | None:
    """`nvidia-smi` on the host, or None when it is not installed."""
    binary = shutil.which("nvidia-smi")
    return run([binary]) if binary else None


def proc_driver_version() -> str | None:
    """The kernel module's own line (`NVRM version: ...`), when the module is loaded."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return next((line.strip() for line in text.splitlines() if line.startswith("NVRM")), None)


def device_nodes(root: str = "/dev") -> list[str]:
    return sorted(glob.glob(os.path.join(root, "nvidia*")))


def parse_ldconfig(text: str, arch: str = "x86-64") -> dict[str, str]:
    """`ldconfig -p` → {soname: path} for libraries of `arch` (the first entry of a name wins)."""
    libraries: dict[str, str] = {}
    for line in text.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match is None:
            continue
        name, flags, path = match.groups()
        if arch and arch not in flags:
            continue
        libraries.setdefault(name, path)
    return libraries


def ldconfig_libraries() -> dict[str, str] | None:
    """The dynamic linker cache, or None when ldconfig cannot be run."""
    binary = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if binary is None:
        return None
    out = run([binary, "-p"])
    return parse_ldconfig(out.stdout) if out.ok else None


def driver_libraries(cache: dict[str, str]) -> dict[str, str]:
    """The NVIDIA driver libraries in a linker cache, by soname."""
    return {name: path for name, path in cache.items() if name.startswith(DRIVER_LIBRARIES)}


def driver_binaries() -> dict[str, str]:
    found = {name: shutil.which(name) for name in DRIVER_BINARIES}
    return {name: path for name, path in found.items() if path}


def toolkit_binaries() -> dict[str, str]:
    found = {name: shutil.which(name) for name in TOOLKIT_BINARIES}
    return {name: path for name, path in found.items() if path}


def docker_info() -> tuple[dict[str, object] | None, CommandOutput | None]:
    """`docker info` as JSON (None when the client is missing or the engine does not answer)."""
    binary = shutil.which("docker")
    if binary is None:
        return None, None
    out = run([binary, "info", "--format", "{{json .}}"])
    if not out.ok:
        return None, out
    try:
        info = json.loads(out.stdout)
    except ValueError:
        return None, out
    return (info if isinstance(info, dict) else None), out


@dataclass(frozen=True)
class CdiSpec:
    """One CDI specification file: its kind and the device names it declares."""

    path: str
    kind: str | None
    devices: tuple[str, ...] = field(default_factory=tuple)
    error: str | None = None
    host_paths: tuple[str, ...] = ()  # every device node and mounted host file it names

    def missing(self) -> list[str]:
        """Host files the spec names that are gone (a driver update since it was generated)."""
        return [p for p in self.host_paths if not os.path.exists(p)]


_YAML_KIND = re.compile(r"^kind:\s*['\"]?([^'\"\s]+)", re.MULTILINE)
_YAML_DEVICE = re.compile(r"^\s*-\s*name:\s*['\"]?([^'\"\s]+)", re.MULTILINE)
_YAML_PATH = re.compile(r"^\s*-?\s*(?:hostPath|path):\s*['\"]?(/[^'\"\s]+)", re.MULTILINE)


def _json_paths(doc: object) -> list[str]:
    """Host files a CDI document names: mounts' hostPath, device nodes' (host)path, hook binaries."""
    found: list[str] = []
    if isinstance(doc, dict):
        named = doc.get("hostPath") or doc.get("path")
        if isinstance(named, str) and named.startswith("/"):
            found.append(named)
        for value in doc.values():
            found.extend(_json_paths(value))
    elif isinstance(doc, list):
        for value in doc:
            found.extend(_json_paths(value))
    return found


def read_cdi_spec(path: str) -> CdiSpec:
    """kind and device names from a CDI JSON or YAML file (the YAML read by its two plain keys)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return CdiSpec(path, None, error=exc.strerror or str(exc))
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            return CdiSpec(path, None, error=f"not JSON: {exc}")
        devices = tuple(str(d.get("name")) for d in doc.get("devices", []) if isinstance(d, dict))
        return CdiSpec(path, doc.get("kind"), devices, host_paths=tuple(dict.fromkeys(_json_paths(doc))))
    kind = _YAML_KIND.search(text)
    paths = tuple(dict.fromkeys(_YAML_PATH.findall(text)))
    return CdiSpec(path, kind.group(1) if kind else None, tuple(_YAML_DEVICE.findall(text)), host_paths=paths)


def cdi_specs(dirs: tuple[str, ...] = CDI_DIRS) -> list[CdiSpec]:
    found: list[CdiSpec] = []
    for folder in dirs:
        for pattern in ("*.json", "*.yaml", "*.yml"):
            found.extend(read_cdi_spec(p) for p in sorted(glob.glob(os.path.join(folder, pattern))))
    return found


def podman_hooks() -> list[str]:
    return sorted(glob.glob(PODMAN_HOOK_GLOB))


def apptainer_nvliblist() -> tuple[str | None, list[str]]:
    """The nvliblist.conf `--nv` reads and the names it lists (binaries and libraries)."""
    for path in NVLIBLIST_PATHS:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        names = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
        return path, names
    return None, []
