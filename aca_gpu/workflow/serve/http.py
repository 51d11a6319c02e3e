"""One HTTP request to a served app, timed on the client's clock: sent → first byte → full answer.

Standard library only (http.client), so the figures are the client's own and nothing between the
request and the socket adds retries or pools: one call is one request, as the ingress sees it.
"""

from __future__ import annotations

import http.client
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Answer:
    """What one request got: `status` 0 when no HTTP answer came (connection refused, reset, timeout)."""

    status: int
    sent: float  # time.time() when the request was sent
    first_byte_s: float | None  # seconds from sending to the answer's status line
    total_s: float  # seconds from sending to the end of the body (or the failure)
    size: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 400

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "first_byte_s": None if self.first_byte_s is None else round(self.first_byte_s, 3),
            "total_s": round(self.total_s, 3),
            "bytes": self.size,
        }
        if self.error:
            doc["error"] = self.error
        return doc


def get(url: str, *, timeout: float, verify: str | bool = True) -> Answer:
    """GET `url` once; never raises for what the network or the server did."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent_wall, start = time.time(), time.monotonic()
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
        conn = http.client.HTTPSConnection(parts.netloc, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(parts.netloc, timeout=timeout)
    try:
        conn.request("GET", path, headers={"User-Agent": "acagpu-serve"})
        response = conn.getresponse()
        first = time.monotonic() - start
        body = response.read()
        return Answer(response.status, sent_wall, first, time.monotonic() - start, len(body))
    except (OSError, http.client.HTTPException) as exc:
        text = str(exc) or type(exc).__name__
        return Answer(0, sent_wall, None, time.monotonic() - start, error=text)
    finally:
        conn.close()


def percentiles(values: list[float], points: tuple[int, ...] = (50, 95, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles (p50, p95, p99) in seconds; None where there is no value."""
    ordered = sorted(values)
    found: dict[str, float | None] = {}
    for p in points:
        if not ordered:
            found[f"p{p}"] = None
            continue
        rank = max(1, -(-p * len(ordered) // 100))
        found[f"p{p}"] = round(ordered[rank - 1], 3)
    return found
