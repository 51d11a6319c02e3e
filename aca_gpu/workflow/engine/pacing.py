"""ARM's write budget on the client's side: a token bucket per subscription (200, 10 a second).

ARM refuses writes beyond its regional bucket with 429 and Retry-After (Microsoft Learn, "Understand
how Azure Resource Manager throttles requests"; that a job start is a write is inferred); a fan-out
that starts hundreds of executions would otherwise spend the subscription's whole budget at once
and have every other write of the user (and its own teardown) refused. Starts take a token here
first; azure-core and the subscription gate (`azure/ratelimit.py`) still honour any 429 that comes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

ARM_WRITE_BURST = 200
ARM_WRITE_REFILL_PER_S = 10.0


class TokenBucket:
    """`capacity` tokens, `refill` a second; `take` never waits (the caller tries again later)."""

    def __init__(
        self,
        capacity: float = ARM_WRITE_BURST,
        refill: float = ARM_WRITE_REFILL_PER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.refill, self._clock = float(capacity), float(refill), clock
        self._tokens, self._at = float(capacity), clock()
        self._lock = threading.Lock()
        self.taken = 0

    def _fill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.refill)
        self._at = now

    def take(self) -> bool:
        with self._lock:
            self._fill()
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            self.taken += 1
            return True

    def hold(self, seconds: float) -> None:
        """A 429's Retry-After: no token for `seconds`."""
        with self._lock:
            self._fill()
            self._tokens = min(self._tokens, -seconds * self.refill)


_BUCKETS: dict[str, TokenBucket] = {}
_BUCKETS_LOCK = threading.Lock()


def write_bucket(subscription: str) -> TokenBucket:
    """One bucket per subscription in this process (the API's runs share it, as ARM does)."""
    with _BUCKETS_LOCK:
        return _BUCKETS.setdefault(subscription, TokenBucket())


def bucket_of(cloud: object) -> TokenBucket:
    """The write bucket of the subscription `cloud` talks to (one shared bucket without one)."""
    return write_bucket(str(getattr(cloud, "subscription_id", "") or "default"))
