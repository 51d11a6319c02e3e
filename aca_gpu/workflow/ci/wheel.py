"""The wheel of the running acagpu, so a repository's CI installs exactly what wrote its workflows.

`ci init` puts this wheel into the repository and pins it by sha256: the workflows then install
acagpu from the checkout with pip's hash checking and `--no-index`, never by name from a package
index (where the name may belong to someone else). Where the wheel comes from, in order:

1. a wheel the user hands in (`--wheel`), checked to be this version;
2. an editable install (a checkout): built from that source tree by `pip wheel` (the project's
   own build backend, so the files are the ones a release would hold);
3. a regular install: re-packed from the installed files its RECORD lists (pure Python, so the
   installed files are the wheel's files), with a fresh RECORD.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from aca_gpu import __version__
from aca_gpu.errors import AcaGpuError, BadInput

DIST = "acagpu"
BUILD_TIMEOUT_S = 300
_WHEEL_NAME = re.compile(r"^acagpu-(?P<version>[^-]+)-py3-none-any\.whl$")
_SKIP_IN_REPACK = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


@dataclass(frozen=True)
class Wheel:
    path: Path
    version: str
    sha256: str
    origin: str  # "given" | "built" | "repacked"

    @property
    def filename(self) -> str:
        return self.path.name


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def wheel_version(path: Path) -> str:
    """The version a wheel's file name and its METADATA agree on; anything else is refused."""
    m = _WHEEL_NAME.match(path.name)
    if not m:
        raise BadInput(f"{path.name} is not an acagpu wheel (expected acagpu-<version>-py3-none-any.whl)")
    try:
        with zipfile.ZipFile(path) as zf:
            name = f"acagpu-{m.group('version')}.dist-info/METADATA"
            text = zf.read(name).decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise BadInput(f"{path}: not a readable acagpu wheel ({exc})") from None
    found = re.search(r"^Version: (.+)$", text, re.MULTILINE)
    if not found or found.group(1).strip() != m.group("version"):
        raise BadInput(f"{path}: its file name and METADATA disagree on the version")
    return m.group("version")


def requires(path: Path) -> list[str]:
    """The wheel's own dependencies (Requires-Dist without extras), as its METADATA lists them."""
    version = wheel_version(path)
    with zipfile.ZipFile(path) as zf:
        text = zf.read(f"acagpu-{version}.dist-info/METADATA").decode("utf-8")
    deps = [m.group(1).strip() for m in re.finditer(r"^Requires-Dist: (.+)$", text, re.MULTILINE)]
    return [d for d in deps if "extra ==" not in d.replace('"', "'").replace("extra==", "extra ==")]


def _editable_source() -> Path | None:
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    raw = dist.read_text("direct_url.json")
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    if not (info.get("dir_info") or {}).get("editable"):
        return None
    url = urlparse(str(info.get("url", "")))
    if url.scheme != "file":
        return None
    source = Path(unquote(url.path))
    return source if (source / "pyproject.toml").is_file() else None


def _build(source: Path, into: Path) -> Path:
    """`pip wheel` of the checkout: without build isolation when the backend is installed (fast,
    offline), else with it (pip fetches the backend)."""
    attempts = [["--no-build-isolation"], []] if _has_backend() else [[]]
    errors: list[str] = []
    for isolation in attempts:
        out = Path(tempfile.mkdtemp(prefix="acagpu-wheel-", dir=into))
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *isolation, "-w", str(out)]
        cmd.append(str(source))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(str(exc))
            continue
        built = sorted(out.glob("acagpu-*.whl"))
        if proc.returncode == 0 and built:
            return built[0]
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        errors.append(lines[-1] if lines else f"pip exited {proc.returncode}")
    raise AcaGpuError(
        f"could not build the acagpu wheel from {source}: {'; '.join(errors)}",
        hint="build one (`pip wheel --no-deps .` in the checkout) and pass it with --wheel",
    )


def _has_backend() -> bool:
    try:
        metadata.distribution("hatchling")
    except metadata.PackageNotFoundError:
        return False
    return True


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack_installed(into: Path) -> Path:
    """The installed (non-editable) acagpu as a wheel: its RECORD's files, a new RECORD."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError as exc:
        raise AcaGpuError("acagpu is not installed as a distribution; pass a wheel with --wheel") from exc
    version = dist.version
    info_dir = f"acagpu-{version}.dist-info"
    target = into / f"acagpu-{version}-py3-none-any.whl"
    rows: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for entry in sorted(dist.files or [], key=str):
            name = str(entry).replace("\\", "/")
            if name.startswith("..") or "__pycache__" in name or name.endswith(".pyc"):
                continue  # console scripts (regenerated from entry_points.txt) and bytecode
            if name.startswith(info_dir + "/") and name.split("/", 1)[1] in _SKIP_IN_REPACK:
                continue
            data = Path(str(entry.locate())).read_bytes()
            zf.writestr(name, data)
            rows.append((name, _record_hash(data), str(len(data))))
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows([*rows, (f"{info_dir}/RECORD", "", "")])
        zf.writestr(f"{info_dir}/RECORD", record.getvalue())
    return target


def current_wheel(work: Path, given: Path | None = None) -> Wheel:
    """This acagpu's wheel, written under `work` (a temporary directory the caller owns)."""
    if given is not None:
        if not given.is_file():
            raise BadInput(f"--wheel {given}: no such file")
        version = wheel_version(given)
        if version != __version__:
            raise BadInput(f"--wheel {given.name} is acagpu {version}, but this is acagpu {__version__}")
        copy = work / given.name
        shutil.copyfile(given, copy)
        return Wheel(copy, version, sha256_of(copy), "given")
    source = _editable_source()
    if source is not None:
        path, origin = _build(source, work), "built"
    else:
        path, origin = repack_installed(work), "repacked"
    version = wheel_version(path)
    if version != __version__:
        raise AcaGpuError(f"the wheel built is acagpu {version}, but this is acagpu {__version__}")
    return Wheel(path, version, sha256_of(path), origin)
