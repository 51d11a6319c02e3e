"""`--wait-for-capacity`: sweep the allowed places until one can place the run, spending nothing between.

A sweep tries every candidate place (the regions × GPU types the user allowed) once, in the order
the unavailability cache suggests (preflight/unavailable.py); each attempt that cannot place is torn
down billing-first before the next begins (the engine's own failover), so between sweeps nothing of
the run exists: no replica, no job or app that could start one, no environment. Then it waits: the
gap starts at 30 s and doubles to 10 min, never past the bound, and one line says what it waits for,
where it found nothing and why, when the next sweep starts and when it gives up.

Reasons are typed, and only those waiting can cure are waited on: no capacity (a replica never
placed, the platform's "0/N nodes are available" or a start deadline passed unplaced) and WorkLoad
Profile Full. Missing quota, a provider not registered or a profile not offered stay as they are
until someone acts: a place refused so is not tried again, and with none left to wait for the run
ends at once, saying how to ask for quota. At the bound the run ends with exit 3 and a table of
every place's last reason.

The gap is real (wall) time, as the client lives in it; against the emulator the platform's times
are scaled (`--time-scale`) and `ACAGPU_CAPACITY_GAP_S` sets a shorter first gap (the doubling and
the 10 min cap stay), so the two clocks meet only through that labelled setting.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aca_gpu.errors import AcaGpuError, BadInput, QuotaError
from aca_gpu.naming import parse_duration
from aca_gpu.output import Progress
from aca_gpu.units import duration_text
from aca_gpu.workflow.preflight import unavailable
from aca_gpu.workflow.preflight.quota import QUOTA_REQUEST_HINT

NO_CAPACITY = "no-capacity"
PROFILE_FULL = "profile-full"
QUOTA = "quota"
NOT_REGISTERED = "provider-not-registered"
NOT_OFFERED = "not-offered"
OTHER = "other"
WAITABLE = frozenset({NO_CAPACITY, PROFILE_FULL})
# how a reason reads in the waiting line and the table
WORDS = {
    NO_CAPACITY: "no capacity",
    PROFILE_FULL: "WorkLoad Profile Full",
    QUOTA: "quota",
    NOT_REGISTERED: "provider not registered",
    NOT_OFFERED: "profile not offered",
    OTHER: "failed",
}
FIRST_GAP_S = 30.0
MAX_GAP_S = 600.0
GAP_ENV = "ACAGPU_CAPACITY_GAP_S"
EXPIRED = "CapacityWaitExpired"
NOTHING_TO_WAIT_FOR = "NothingToWaitFor"
NOT_OFFERED_CODES = (
    "ProfileNotOffered",
    "LocationNotAvailableForResourceType",
    "NoRegisteredProviderFound",
    "WorkloadProfileTypeNotSupported",
    "InvalidWorkloadProfileType",
)


def reason_of(error: AcaGpuError) -> str:
    """The typed reason a place could not take the run (what decides whether waiting helps)."""
    code, text = error.code or "", error.message
    if re.search(r"workload ?profile ?full", text, re.I):
        return PROFILE_FULL
    if code in ("CapacityUnavailable", "ReplicaNotRunning", "ReplicaNotPlaced") or re.search(
        r"waiting for a running replica|never placed|no replica of it ran|nodes are available", text, re.I
    ):
        return NO_CAPACITY
    if code == "MissingSubscriptionRegistration":
        return NOT_REGISTERED
    if code in NOT_OFFERED_CODES:
        return NOT_OFFERED
    if isinstance(error, QuotaError):
        return QUOTA
    return OTHER


MAX_BOUND_S = 7 * 86400.0


def bound_of(value: str | None) -> float | None:
    """--wait-for-capacity DURATION in seconds (None: not given); a week at most, since the run's
    TTL and the user's attention both end long before a GPU wait should."""
    text = (value or "").strip()
    if not value:
        return None
    try:
        seconds = parse_duration(text).total_seconds()
    except BadInput as exc:
        raise BadInput(f"--wait-for-capacity: {exc.message}") from exc
    if seconds > MAX_BOUND_S:
        raise BadInput(f"--wait-for-capacity {text!r} is too long: at most 7d")
    return seconds


def first_gap_s() -> float:
    try:
        return max(0.01, float(os.environ.get(GAP_ENV, "") or FIRST_GAP_S))
    except ValueError:
        return FIRST_GAP_S


@dataclass
class Seen:
    """A place's last answer in this wait."""

    region: str
    gpu: str
    reason: str
    detail: str
    sweep: int

    def short(self) -> str:
        return f"{self.region} ({WORDS.get(self.reason, self.reason)})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "gpu": self.gpu,
            "reason": self.reason,
            "waited_on": self.reason in WAITABLE,
            "detail": self.detail,
            "sweep": self.sweep,
        }


@dataclass
class CapacityWait:
    """One run's wait: its bound, its sweeps and every place's last reason."""

    bound_s: float
    first_gap: float = field(default_factory=first_gap_s)
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    sweeps: int = 1  # the sweep in progress (1: the run's first pass over its places)
    seen: dict[tuple[str, str], Seen] = field(default_factory=dict)
    waited_s: float = 0.0
    placed: str | None = None  # where it placed in the end
    asks: list[dict[str, Any]] = field(default_factory=list)  # each later sweep's asks (parking.py)

    def gap(self) -> float:
        return min(self.first_gap * 2.0 ** (self.sweeps - 1), MAX_GAP_S)

    def left_s(self) -> float:
        return self.bound_s - (time.monotonic() - self.started)

    def saw(self, region: str, gpu: str, profile_type: str, error: AcaGpuError) -> str:
        """Note a place's refusal; one waiting can cure is remembered for the next runs too."""
        reason = reason_of(error)
        self.seen[(region, gpu)] = Seen(region, gpu, reason, error.message, self.sweeps)
        if reason in WAITABLE:
            unavailable.remember(region, profile_type, reason, error.message)
        return reason

    def worth_trying(self, place: tuple[str, str]) -> bool:
        """Tried again next sweep: not yet seen, or last refused for a reason waiting can cure."""
        seen = self.seen.get(place)
        return seen is None or seen.reason in WAITABLE

    def line(self, gpu: str, next_at: float) -> str:
        """`waiting for a T4: no capacity in eastus (...), westus3 (quota); next try ..., gives up ...`."""
        places = ", ".join(s.short() for s in self.seen.values())
        return (
            f"waiting for a {gpu.upper()}: no capacity in {places}; next try "
            f"{_clock(next_at)} (in {duration_text(max(0.0, next_at - time.time()))}), gives up "
            f"{_clock(self.started_wall + self.bound_s)} (sweep {self.sweeps} done)"
        )

    def pause(self, gpu: str, progress: Progress, cancel: threading.Event) -> bool:
        """Wait out the gap before the next sweep, saying so; False at the bound or on Ctrl-C (a
        KeyboardInterrupt in the main thread sets `cancel`: nothing of the run exists to tear down)."""
        left = self.left_s()
        if left <= 0:
            return False
        gap = min(self.gap(), left)
        began = time.monotonic()
        try:
            progress.warn(self.line(gpu, time.time() + gap))
            while not cancel.wait(min(1.0, max(0.0, gap - (time.monotonic() - began)))):
                if time.monotonic() - began >= gap:
                    break
        except KeyboardInterrupt:
            cancel.set()
        self.waited_s += time.monotonic() - began
        if cancel.is_set():
            return False
        self.sweeps += 1
        progress.note(f"sweep {self.sweeps}: trying again the places waiting can cure")
        return True

    def asked(self, began: float, places: list[dict[str, Any]]) -> None:
        """A sweep's asks, for the document: when (epoch seconds), each place's answer and the ARM
        writes it cost (one start; a delete when it found room, a stop when ARM did not end it)."""
        self.asks.append(
            {
                "sweep": self.sweeps,
                "began_at": round(began, 3),
                "ended_at": round(time.time(), 3),
                "places": places,
            }
        )

    def table(self) -> str:
        """Every place's last reason, one row each: region, GPU, reason, waited on, the platform's words."""
        rows = [
            (s.region, s.gpu, s.reason, "waited" if s.reason in WAITABLE else "not waited", s.detail[:140])
            for s in self.seen.values()
        ]
        head = ("REGION", "GPU", "REASON", "", "WHAT WAS SAID")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        return "\n".join(
            "  " + "  ".join(f"{cell:<{widths[i]}}" for i, cell in enumerate(row[:4])) + "  " + row[4]
            for row in [head, *rows]
        )

    def error(self, gpu: str) -> QuotaError:
        """Exit 3: at the bound, or nothing left that waiting could cure."""
        waitable = any(s.reason in WAITABLE for s in self.seen.values())
        places = ", ".join(s.short() for s in self.seen.values())
        if waitable:
            return QuotaError(
                f"no place for a {gpu.upper()} within {duration_text(self.bound_s)} "
                f"({self.sweeps} sweep(s)): {places}",
                code=EXPIRED,
                hint="capacity comes back within minutes to hours: wait longer (--wait-for-capacity) "
                "or allow more places (--regions, --gpu)",
            )
        return QuotaError(
            f"nothing to wait for: no place for a {gpu.upper()} is one waiting can cure "
            f"(quota, registration and offers do not change by themselves): {places}",
            code=NOTHING_TO_WAIT_FOR,
            hint=QUOTA_REQUEST_HINT if any(s.reason == QUOTA for s in self.seen.values()) else None,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "bound_s": round(self.bound_s, 1),
            "sweeps": self.sweeps,
            "waited_s": round(self.waited_s, 1),
            "placed": self.placed,
            "places": [s.as_dict() for s in self.seen.values()],
            "asks": self.asks,
        }


def learn(wait: CapacityWait | None, region: str, gpu: str, profile_type: str, error: AcaGpuError) -> None:
    """A place's refusal: this wait's (every reason), the cache's (what waiting can cure)."""
    if wait is not None:
        wait.saw(region, gpu, profile_type, error)
    elif reason_of(error) in WAITABLE:
        unavailable.remember(region, profile_type, reason_of(error), error.message)


def placed(
    wait: CapacityWait | None, region: str, gpu: str, profile_type: str, error: AcaGpuError | None
) -> None:
    """The run got a replica here (whatever its verdict): what was said of the place is forgotten."""
    if error is not None and reason_of(error) in WAITABLE:
        return
    unavailable.clear(region, profile_type)
    if wait is not None:
        wait.placed = region


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%H:%M:%S")
