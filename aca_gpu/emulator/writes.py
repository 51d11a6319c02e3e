"""ARM writes counted per caller, region and time: `GET /_emulator/writes`.

A write is every ARM request that is not a read (PUT, PATCH, POST, DELETE under `/subscriptions/`),
as ARM's throttling classes them (throttle.py: a POST counts as a write, a DELETE as a delete). The
caller is the bearer token's principal (its object id), the identity ARM throttles by besides the
subscription ("per subscription and per principal": Microsoft Learn on ARM's throttling); every
process signed in as one identity is one caller, so a test that wants one run's writes runs it alone
or tells its writes apart by time. The region is where ARM routed the request (the path's location,
else its resource group's). Each write keeps the wall time it was answered at (the client's clock
too: one machine) and the emulated seconds since the emulator started, so a test can put them beside
a run's own timeline (`capacity_wait.asks` in its document).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

KEPT = 20000  # the newest writes kept one by one (the counts are never dropped)
READS = ("GET", "HEAD", "OPTIONS")


def is_write(method: str) -> bool:
    return method.upper() not in READS


@dataclass
class Writes:
    """Every ARM write the emulator answered, by caller."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (caller, region) -> writes
    kept: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEPT))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(
        self, caller: str, method: str, path: str, region: str, status: int, emulated_s: float
    ) -> None:
        with self._lock:
            self.counts[(caller, region)] += 1
            self.kept.append(
                {
                    "caller": caller,
                    "method": method.upper(),
                    "path": path,
                    "region": region,
                    "status": status,
                    "at": round(time.time(), 4),
                    "emulated_s": round(emulated_s, 3),
                }
            )

    def describe(self, caller: str | None = None) -> dict[str, Any]:
        with self._lock:
            callers: dict[str, dict[str, Any]] = {}
            for (who, region), count in sorted(self.counts.items()):
                if caller is not None and who != caller:
                    continue
                row = callers.setdefault(who, {"total": 0, "by_region": {}})
                row["total"] += count
                row["by_region"][region] = count
            kept = [w for w in self.kept if caller is None or w["caller"] == caller]
        return {
            "rule": "ARM requests other than GET/HEAD, per caller (the token's principal) and region",
            "callers": callers,
            "writes": kept,
        }
