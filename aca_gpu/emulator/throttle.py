"""ARM's subscription throttling: a token bucket per subscription and operation type.

Since 2024 ARM limits each subscription with token buckets per operation type (reads: 250 tokens,
refilled 25 per second; writes and deletes: 200, refilled 10 per second). A request that finds its
bucket empty gets HTTP 429 with `Retry-After`; every answer carries what is left in
`x-ms-ratelimit-remaining-subscription-{reads,writes,deletes}`.

The `throttle` fault switches this on (`op=` deletes|writes|reads, default deletes; `refill=` tokens
per emulated second; `burst=` bucket size; `start=` tokens in the bucket when the subscription is
first seen, to stand for a bucket other callers already drained). Refill runs on the emulated clock,
so at time scale 0.5 ten deletes per emulated second are twenty per wall second.

`ACAGPU_EMULATOR_ARM_LIMITS=on` in the server's environment puts all three buckets in force at ARM's
figures without a fault (a fan-out benchmark's setting); a `throttle` fault for an operation type
still sets that bucket's figures. It is off by default: the recorded answers carry ARM's own header
values, and a test at time scale 1 that polls fast would wait on the read bucket.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aca_gpu.emulator.arm import ArmError
from aca_gpu.emulator.timing import Clock

if TYPE_CHECKING:
    from aca_gpu.emulator.context import Ctx

MSG_THROTTLED = (
    "Number of '{op}' requests for subscription '{sub}' actor '{actor}' exceeded. "
    "Please try again after '{seconds}' seconds after additional tokens are available. "
    "Refer to https://aka.ms/arm-throttling for additional information."
)

# ARM's published limits per subscription (bucket, refill per second), from 2024 on.
LIMITS: dict[str, tuple[float, float]] = {
    "reads": (250.0, 25.0),
    "writes": (200.0, 10.0),
    "deletes": (200.0, 10.0),
}


LIMITS_SWITCH = "ACAGPU_EMULATOR_ARM_LIMITS"


def limits_on() -> bool:
    """Are ARM's buckets in force without a fault (`ACAGPU_EMULATOR_ARM_LIMITS=on`)?"""
    return os.environ.get(LIMITS_SWITCH, "").strip().lower() in ("1", "on", "true", "yes")


def operation_of(method: str) -> str:
    """ARM's operation type for an HTTP method (a POST counts as a write)."""
    method = method.upper()
    if method in ("GET", "HEAD"):
        return "reads"
    return "deletes" if method == "DELETE" else "writes"


@dataclass
class Bucket:
    size: float
    refill: float  # tokens per emulated second
    tokens: float
    at: float  # monotonic time of the last refill

    def take(self, clock: Clock) -> float | None:
        """Spend one token; None when granted, else the emulated seconds until one is back."""
        now = clock.now()
        self.tokens = min(self.size, self.tokens + clock.emulated(now - self.at) * self.refill)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.refill if self.refill > 0 else 3600.0


class Throttle:
    """The buckets of one subscription, created when a `throttle` fault first applies to them."""

    def __init__(self) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.throttled = 0

    def admit(self, clock: Clock, op: str, params: dict[str, str]) -> tuple[float | None, int]:
        """(emulated seconds to wait, or None when admitted; tokens left) for one request."""
        size, refill = LIMITS[op]
        bucket = self.buckets.get(op)
        if bucket is None:
            size = float(params.get("burst", size))
            bucket = Bucket(
                size, float(params.get("refill", refill)), float(params.get("start", size)), clock.now()
            )
            self.buckets[op] = bucket
        wait = bucket.take(clock)
        if wait is not None:
            self.throttled += 1
        return wait, int(bucket.tokens)


def admit(ctx: Ctx, method: str, actor: str = "") -> dict[str, str]:
    """The rate-limit headers for an admitted ARM call in `ctx`'s subscription, or a 429 ArmError
    (code SubscriptionRequestsThrottled, `Retry-After`) when a `throttle` fault empties its bucket."""
    op = operation_of(method)
    fault = next((f for f in ctx.faults.all("throttle") if f.param("op", "deletes") == op), None)
    if fault is None and not limits_on():
        return {}
    wait, left = ctx.throttle.admit(ctx.clock, op, fault.params if fault is not None else {})
    header = f"x-ms-ratelimit-remaining-subscription-{op}"
    if wait is None:
        return {header: str(left)}
    wall = max(ctx.clock.scaled(wait), 0.001)
    seconds = max(1, math.ceil(wall))
    raise ArmError(
        MSG_THROTTLED.format(op=op.rstrip("s"), sub=ctx.subscription, actor=actor, seconds=seconds),
        code="SubscriptionRequestsThrottled",
        status=429,
        headers={"Retry-After": str(seconds), "retry-after-ms": str(max(1, round(wall * 1000))), header: "0"},
    )
