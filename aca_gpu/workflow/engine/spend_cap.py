"""`--max-cost USD`: never spend more than the user said, however many shards or attempts a run has.

Peers cap the price per hour (SkyPilot `max_hourly_cost`, dstack `max_price`); a fan-out makes
N × cost easy to overshoot, so the cap here is on what the run spends. Spend is the run's measured
replica lifetimes (the running ones' time so far included, the runtime's `gpu_seconds`) at one
replica's price per second in the run's first region (the plan's estimate table).

Two rules, read by every task runner of the run at each look (one poll interval apart):
- **No new start** (a shard, a retry, a probe, a tester, a single run) once what is spent reaches
  the cap less what one more start costs: a replica started bills at least until the next look can
  stop it, one poll interval at its price.
- **Stop at the cap.** When what is spent plus what the running replicas will bill by the next look
  reaches the cap, every running attempt is stopped (billing first), the queued ones are not
  started, and the run ends with exit 8 (`CostCapReached`), naming what was done and what was not;
  `--rerun-failed` continues a fan-out under a new cap.

The overshoot is bounded by the replicas running × their price × one poll interval (plus the time
ARM takes to accept the stops, which the bound does not count); the document states it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import EXIT_COST_CAP, AcaGpuError, BadInput

CODE = "CostCapReached"


class CostCapReached(AcaGpuError):
    """The run spent what --max-cost allowed: what ran was stopped, what did not was not started."""

    exit_code = EXIT_COST_CAP


@dataclass
class SpendCap:
    """One run's cap, shared by its task runners (and its region attempts)."""

    cap_usd: float
    usd_per_s: float  # one replica's price per second (first region, the plan's table)
    tick_s: float  # how often a runner looks: one poll interval
    seconds: Callable[[], float] = field(default=lambda: 0.0, repr=False)  # replica-seconds so far
    reached: bool = False
    spent_usd: float = 0.0
    peak_running: int = 0
    stops_took_s: float | None = None  # how long ARM took to accept the stops at the cap
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def checked(cls, usd: float, usd_per_s: float) -> SpendCap:
        """A cap from --max-cost; bad input unless it is positive and at least one start fits."""
        if not usd > 0:
            raise BadInput(f"--max-cost {usd:g}: give a positive amount in USD, e.g. 5 or 0.50")
        cap = cls(float(usd), usd_per_s, tick_s=1.0)
        if cap.start_cost_usd > cap.cap_usd:
            raise BadInput(
                f"--max-cost ${usd:g} is less than one start costs (${cap.start_cost_usd:.6f}: one "
                "replica for one look interval): nothing could start"
            )
        return cap

    @property
    def start_cost_usd(self) -> float:
        """What one more start costs at least: its replica bills until the next look can stop it."""
        return self.usd_per_s * self.tick_s

    def look(self) -> float:
        """What is spent now (USD), remembered for the document."""
        with self._lock:
            self.spent_usd = max(self.spent_usd, self.seconds() * self.usd_per_s)
            return self.spent_usd

    def may_start(self) -> bool:
        return not self.reached and self.look() + self.start_cost_usd <= self.cap_usd

    def must_stop(self, running: int) -> bool:
        """True (and the cap marked reached) once the running replicas would pass it by the next look."""
        self.peak_running = max(self.peak_running, running)
        if not self.reached and self.look() + running * self.usd_per_s * self.tick_s >= self.cap_usd:
            self.reached = True
        return self.reached

    def overshoot_bound_usd(self, running: int) -> float:
        return running * self.usd_per_s * self.tick_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "cap_usd": round(self.cap_usd, 4),
            "spent_usd": round(self.spent_usd, 6),
            "reached": self.reached,
            "start_cost_usd": round(self.start_cost_usd, 6),
            "usd_per_second_per_replica": round(self.usd_per_s, 7),
            "look_every_s": self.tick_s,
            "overshoot_bound_usd": round(self.overshoot_bound_usd(max(1, self.peak_running)), 6),
            "overshoot_bound": "replicas running × their price × one look interval (ARM's time to "
            "accept the stops not included)",
            "stops_took_s": None if self.stops_took_s is None else round(self.stops_took_s, 3),
        }

    def error(self, done: str, not_done: str, rerun: str | None) -> CostCapReached:
        return CostCapReached(
            f"--max-cost ${self.cap_usd:g} reached (≈${self.spent_usd:.4f} spent): {done}; not done: "
            f"{not_done}",
            code=CODE,
            hint=rerun,
        )
