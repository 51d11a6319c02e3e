"""ARM's subscription throttling, seen from the client: one gate per subscription's clients.

ARM limits each subscription with token buckets per operation type (writes and deletes: 200 tokens,
10 per second back) and says how many are left in `x-ms-ratelimit-remaining-subscription-<op>`;
an empty bucket answers 429 with `Retry-After`. azure-core's RetryPolicy already waits out one
429 before its next try; this gate makes the *other* threads of the same subscription wait too, so
a reap with many deletes in flight does not send a burst that can only be refused again, and it
holds back writes once the bucket reports empty. It runs on every try (a per-retry policy).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.policies import HTTPPolicy

REMAINING = "x-ms-ratelimit-remaining-subscription-"
DEFAULT_WAIT_S = 1.0  # when a bucket says 0 left but no 429 told us for how long


@dataclass(frozen=True)
class RateLimits:
    """What the gate saw: requests refused, seconds spent held, the last remaining counts."""

    throttled: int
    held_s: float
    remaining: dict[str, int]


def _operation(method: str) -> str | None:
    method = method.upper()
    if method in ("GET", "HEAD"):
        return None
    return "deletes" if method == "DELETE" else "writes"


def retry_after_seconds(headers: Any) -> float | None:
    """`retry-after-ms` (what azure-core prefers) or `Retry-After` in seconds."""
    for name, scale in (("retry-after-ms", 0.001), ("x-ms-retry-after-ms", 0.001), ("Retry-After", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


class RateLimitGate(HTTPPolicy):  # type: ignore[type-arg]
    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._open_at: dict[str, float] = {}
        self._remaining: dict[str, int] = {}
        self._last_wait: dict[str, float] = {}
        self._throttled = 0
        self._held = 0.0
        self._clock, self._sleep = clock, sleep

    def __deepcopy__(self, memo: dict[int, Any]) -> RateLimitGate:
        return self  # one gate per subscription, shared by every client and copy of its policies

    def limits(self) -> RateLimits:
        with self._lock:
            return RateLimits(self._throttled, round(self._held, 3), dict(self._remaining))

    def _wait_turn(self, op: str) -> None:
        while True:
            with self._lock:
                delay = self._open_at.get(op, 0.0) - self._clock()
            if delay <= 0:
                return
            with self._lock:
                self._held += delay
            self._sleep(delay)

    def _observe(self, op: str | None, status: int, headers: Any) -> None:
        with self._lock:
            for kind in ("reads", "writes", "deletes"):
                value = headers.get(REMAINING + kind)
                if value is not None and str(value).isdigit():
                    self._remaining[kind] = int(value)
            if op is None:
                return
            if status == 429:
                self._throttled += 1
                wait = retry_after_seconds(headers) or DEFAULT_WAIT_S
                self._last_wait[op] = wait
                self._open_at[op] = max(self._open_at.get(op, 0.0), self._clock() + wait)
            elif self._remaining.get(op) == 0:  # the next one would be refused: pause like a 429 would
                wait = self._last_wait.get(op, DEFAULT_WAIT_S)
                self._open_at[op] = max(self._open_at.get(op, 0.0), self._clock() + wait)

    def send(self, request: PipelineRequest) -> PipelineResponse:  # type: ignore[type-arg]
        op = _operation(request.http_request.method)
        if op is not None:
            self._wait_turn(op)
        response = self.next.send(request)
        http = response.http_response
        self._observe(op, http.status_code, http.headers)
        return response
