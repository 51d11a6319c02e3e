"""The dependency lock `ci init` writes beside acagpu's wheel: CI installs what was tested.

The wheel pins acagpu itself; its ~20 dependencies (and theirs) would otherwise be resolved fresh
from the index on every run, so a new release of any of them could change what CI runs. The lock
lists every distribution acagpu needs on the CI runner (Linux x86_64, CPython 3.11: the markers
are evaluated for it, not for this machine) at the version installed here, which is the version
acagpu was tested with. Hashes come from the wheels pip downloads for that platform; pip's
hash-checking mode is all or nothing, so when one cannot be had (offline, a package only built from
source) the lock pins versions alone and says so. The workflows install it with `--no-deps`: no
resolution happens on the runner.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

# the runner the written workflows use (actions/setup-python 3.11 on ubuntu-latest)
CI_ENVIRONMENT = {
    "python_version": "3.11",
    "python_full_version": "3.11.9",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_version": "",
    "implementation_version": "3.11.9",
}
# in the order pip on an ubuntu-24.04 runner (glibc 2.39) prefers them, so the hash is of the wheel
# the runner will pick
CI_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(39, 16, -1)),
    "manylinux2014_x86_64",
    "linux_x86_64",
)
DOWNLOAD_TIMEOUT_S = 300
HEADER = "# written by `acagpu ci init`: acagpu's dependencies at the versions it was tested with"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    sha256: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lock:
    pins: tuple[Pin, ...]
    missing: tuple[str, ...] = ()  # needed on the runner but not installed here: not locked
    note: str | None = None  # why there are no hashes, when there are none

    @property
    def hashed(self) -> bool:
        return bool(self.pins) and all(p.sha256 for p in self.pins)

    @property
    def pip_flags(self) -> str:
        return "--no-deps --require-hashes" if self.hashed else "--no-deps"

    def render(self) -> str:
        lines = [HEADER, f"# install: pip install {self.pip_flags} -r <this file>"]
        if self.note:
            lines.append(f"# {self.note}")
        for pin in self.pins:
            hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in pin.sha256) if self.hashed else ""
            lines.append(f"{pin.name}=={pin.version}{hashes}")
        return "\n".join(lines) + "\n"


def _wanted(req: Requirement, extras: Iterable[str]) -> bool:
    if req.marker is None:
        return True
    return any(
        Marker(str(req.marker)).evaluate({**CI_ENVIRONMENT, "extra": extra}) for extra in (*extras, "")
    )


def closure(requirements: Iterable[str]) -> tuple[list[Pin], list[str]]:
    """Every distribution `requirements` pull in on the runner, at the version installed here."""
    pins: dict[str, Pin] = {}
    missing: list[str] = []
    queue: list[tuple[str, tuple[str, ...]]] = [(r, ()) for r in requirements]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while queue:
        text, parent_extras = queue.pop(0)
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if not _wanted(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        pins.setdefault(name, Pin(name, dist.version))
        queue += [(child, tuple(req.extras)) for child in dist.requires or []]
    return sorted(pins.values(), key=lambda p: p.name), sorted(set(missing))


_hash_cache: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], str | None]] = {}


def download_hashes(pins: list[Pin]) -> tuple[dict[str, str], str | None]:
    """{name: sha256} of the wheels pip downloads for the runner's platform, or why not."""
    key = tuple((p.name, p.version) for p in pins)
    if key in _hash_cache:
        return _hash_cache[key]
    platforms = [arg for p in CI_PLATFORMS for arg in ("--platform", p)]
    with tempfile.TemporaryDirectory(prefix="acagpu-lock-") as work:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
        cmd += [*platforms, "--python-version", "3.11", "--implementation", "cp", "--dest", work]
        cmd += [f"{p.name}=={p.version}" for p in pins]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {}, f"no hashes: pip download failed ({type(exc).__name__})"
        if done.returncode != 0:
            last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.startswith("ERROR")), "")
            return {}, f"no hashes: pip download failed ({last[:160] or f'exit {done.returncode}'})"
        found = {_wheel_name(f.name): _sha256(f) for f in Path(work).iterdir() if f.suffix == ".whl"}
    _hash_cache[key] = (found, None)
    return found, None


def make_lock(requirements: Iterable[str], *, hashes: bool = True) -> Lock:
    pins, missing = closure(requirements)
    if not hashes:
        return Lock(tuple(pins), tuple(missing), note="versions only (--no-lock-hashes)")
    found, why = download_hashes(pins)
    lacking = [p.name for p in pins if p.name not in found]
    if why is None and lacking:
        why = f"no hashes: no wheel for the runner of {', '.join(lacking[:3])}"
    hashed = tuple(Pin(p.name, p.version, (found[p.name],) if p.name in found else ()) for p in pins)
    return Lock(hashed, tuple(missing), note=why)


def _wheel_name(filename: str) -> str:
    return canonicalize_name(re.split(r"-\d", filename, maxsplit=1)[0].replace("_", "-"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
