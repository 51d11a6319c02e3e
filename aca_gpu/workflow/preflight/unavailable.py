"""What one run learns about capacity, the next knows: region × GPU profile seen without capacity.

A place (region, GPU profile type) where a run found no capacity is remembered for `TTL_S` (30 min)
in `unavailable.json` beside the other caches, so a run started meanwhile, or the next shard of a
fan-out, tries the places not known empty first (`order`), `acagpu check` says what is known, and a
place that works is forgotten at once (`clear`). Only what waiting can cure is kept (no capacity,
WorkLoad Profile Full): quota is read fresh by every preflight.

Concurrent runs write it: every change holds an exclusive `flock` on a lock file beside it, reads,
changes and writes a temporary file that replaces the old one (`os.replace`), so a reader never
sees half a file and no writer loses another's entry. Best effort: a cache that cannot be read or
written never fails a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aca_gpu.workflow.preflight.drivers import cache_path as drivers_cache_path

TTL_S = 30 * 60.0
FILE = "unavailable.json"
T = TypeVar("T")


def cache_path() -> Path:
    return drivers_cache_path().with_name(FILE)


@dataclass(frozen=True)
class Sighting:
    """One place seen without capacity: when, why (a typed reason) and the platform's words."""

    location: str
    profile_type: str
    reason: str
    detail: str
    seen_at: float  # epoch seconds

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.seen_at)

    def as_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "profile": self.profile_type,
            "reason": self.reason,
            "detail": self.detail,
            "seen_at": round(self.seen_at, 3),
            "age_s": round(self.age_s, 1),
            "forgotten_in_s": round(max(0.0, TTL_S - self.age_s), 1),
        }


def _key(location: str, profile_type: str) -> str:
    return f"{profile_type.lower()}@{location.replace(' ', '').lower()}"


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def _fresh(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    now = time.time()
    return {
        k: v
        for k, v in entries.items()
        if isinstance(v.get("seen_at"), (int, float)) and now - float(v["seen_at"]) < TTL_S
    }


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """The live entries under the lock; what the caller leaves in the dict is written back atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(FILE + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entries = _fresh(_read(path))
            yield entries
            fd, tmp = tempfile.mkstemp(prefix=".unavailable-", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(entries, out, indent=2, sort_keys=True)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def remember(location: str, profile_type: str, reason: str, detail: str, path: Path | None = None) -> None:
    """Best effort: note a place seen without capacity now."""
    with contextlib.suppress(OSError), _locked(path or cache_path()) as entries:
        entries[_key(location, profile_type)] = {
            "location": location,
            "profile": profile_type,
            "reason": reason,
            "detail": detail[:300],
            "seen_at": time.time(),
        }


def clear(location: str, profile_type: str, path: Path | None = None) -> None:
    """A place that placed a replica has capacity: forget what was said of it."""
    path = path or cache_path()
    if _key(location, profile_type) not in _read(path):
        return  # nothing to forget: no lock, no write
    with contextlib.suppress(OSError), _locked(path) as entries:
        entries.pop(_key(location, profile_type), None)


def known(path: Path | None = None) -> list[Sighting]:
    """Every place known without capacity, newest first (entries past the TTL are not read)."""
    found = [
        Sighting(
            str(v.get("location", "")),
            str(v.get("profile", "")),
            str(v.get("reason", "")),
            str(v.get("detail", "")),
            float(v["seen_at"]),
        )
        for v in _fresh(_read(path or cache_path())).values()
    ]
    return sorted(found, key=lambda s: -s.seen_at)


def lookup(location: str, profile_type: str, path: Path | None = None) -> Sighting | None:
    key = _key(location, profile_type)
    return next((s for s in known(path) if _key(s.location, s.profile_type) == key), None)


def order(places: Sequence[T], where: Any, path: Path | None = None) -> list[T]:
    """`places` with those known empty moved last (oldest sighting first among them), else as given.

    `where(place)` gives a place's (location, profile type)."""
    seen = {_key(s.location, s.profile_type): s for s in known(path)}

    def rank(item: tuple[int, T]) -> tuple[int, float, int]:
        index, place = item
        sighting = seen.get(_key(*where(place)))
        return (0, 0.0, index) if sighting is None else (1, sighting.seen_at, index)

    return [place for _, place in sorted(enumerate(places), key=rank)]
