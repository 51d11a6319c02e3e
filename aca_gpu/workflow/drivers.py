"""The last host driver seen per GPU profile, so validation can predict a verdict before deploying.

ACA does not publish its GPU host drivers. Every nvidia-smi acagpu reads updates a small cache;
without one, the bundled default is the driver an ACA A100 replica reported in the seed tutorial's
nvidia-smi output (535.54.03), labelled as such in the verdict.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from aca_gpu.naming import iso_utc

BUNDLED_DRIVER = "535.54.03"
BUNDLED_SOURCE = "bundled: nvidia-smi of an ACA serverless A100 replica (535.54.03)"


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
        return exact["driver"], f"seen in {location} at {exact.get('seen_at', '?')}"
    prefix = f"{profile_type.lower()}@"
    others = sorted(
        (v for k, v in seen.items() if k.startswith(prefix) and v.get("driver")),
        key=lambda v: v.get("seen_at", ""),
    )
    if others:
        return others[-1]["driver"], f"seen in another region at {others[-1].get('seen_at', '?')}"
    return BUNDLED_DRIVER, BUNDLED_SOURCE


def remember_driver(profile_type: str, location: str, driver: str, path: Path | None = None) -> None:
    """Best effort: a read-only home must never fail a validation."""
    path = path or cache_path()
    seen = _load(path)
    seen[_key(profile_type, location)] = {"driver": driver, "seen_at": iso_utc(datetime.now(UTC))}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(seen, indent=2, sort_keys=True), encoding="utf-8")
    except OSError:
        pass
