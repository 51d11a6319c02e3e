"""The last host driver seen per GPU profile, so validation can predict a verdict before deploying.

ACA does not publish its GPU host drivers, but a GPU replica's pod says its driver in a system event
(`GpuDriverInfo`: "pod started, CUDA driver 580.159.04") before its container starts. Every such
event and every nvidia-smi acagpu reads updates a small cache; without one, the bundled default is
the driver that event named on a serverless T4 in Sweden Central on 2026-09-18 (580.159.04; CUDA
≤ 13.0), labelled as such in the verdict. (Until 0.4 the default was 535.54.03, from a 2024
tutorial's nvidia-smi on an A100: 2026 hosts run R580.)
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from aca_gpu.naming import iso_utc

BUNDLED_DRIVER = "580.159.04"
BUNDLED_SOURCE = (
    "bundled: GpuDriverInfo event of an ACA serverless T4 replica, 2026-09-18 (580.159.04); "
    "no driver seen here yet"
)
EVENT = "GpuDriverInfo"


def cache_path() -> Path:
    base = os.environ.get("ACAGPU_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), "acagpu"
    )
    return Path(base) / "drivers.json"


def _load(path: Path) -> dict[str, dict[str, str]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def _key(profile_type: str, location: str) -> str:
    return f"{profile_type.lower()}@{location.lower()}"


def known_driver(profile_type: str, location: str, path: Path | None = None) -> tuple[str, str]:
    """(driver, where it came from): this region's last sighting, any region's, else the bundled one."""
    seen = _load(path or cache_path())
    exact = seen.get(_key(profile_type, location))
    if exact and exact.get("driver"):
        how = f" ({exact['how']})" if exact.get("how") else ""
        return exact["driver"], f"seen in {location} at {exact.get('seen_at', '?')}{how}"
    prefix = f"{profile_type.lower()}@"
    others = sorted(
        (v for k, v in seen.items() if k.startswith(prefix) and v.get("driver")),
        key=lambda v: v.get("seen_at", ""),
    )
    if others:
        return others[-1]["driver"], f"seen in another region at {others[-1].get('seen_at', '?')}"
    return BUNDLED_DRIVER, BUNDLED_SOURCE


def latest_driver(path: Path | None = None) -> tuple[str, str]:
    """(driver, where it came from) for a question about ACA with no profile or region in it
    (`compat` without `--driver`): the newest driver seen on any profile, else the bundled one."""
    seen = sorted((v for v in _load(path or cache_path()).values() if v.get("driver")),
                  key=lambda v: v.get("seen_at", ""))  # fmt: skip
    if not seen:
        return BUNDLED_DRIVER, BUNDLED_SOURCE
    how = f" ({seen[-1]['how']})" if seen[-1].get("how") else ""
    return seen[-1]["driver"], f"ACA's latest seen here, at {seen[-1].get('seen_at', '?')}{how}"


def remember_driver(
    profile_type: str, location: str, driver: str, path: Path | None = None, *, how: str = ""
) -> None:
    """Best effort: a read-only home must never fail a validation. `how`: `GpuDriverInfo event` or
    `nvidia-smi` (empty: not said)."""
    path = path or cache_path()
    seen = _load(path)
    entry = {"driver": driver, "seen_at": iso_utc(datetime.now(UTC))}
    if how:
        entry["how"] = how
    seen[_key(profile_type, location)] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(seen, indent=2, sort_keys=True), encoding="utf-8")
    except OSError:
        pass


DRIVER_IN_EVENT = re.compile(r"CUDA driver (?P<driver>\d+(?:\.\d+){1,2})")


def driver_of_event(message: str) -> str | None:
    """The driver a `GpuDriverInfo` message names ("pod started, CUDA driver 580.159.04")."""
    found = DRIVER_IN_EVENT.search(message)
    return found["driver"] if found else None
