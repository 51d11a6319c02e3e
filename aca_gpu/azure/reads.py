"""Reads that outlast a bad minute: a GET with no readable answer is sent again, backing off.

A GET is idempotent, and a long-running operation's status poll is one: an empty 200 on an
operation status, a body that is not JSON, or a connection lost mid-answer says nothing about the
resource, so the same GET goes out again after an exponentially growing pause with jitter (so many
clients do not retry in step), within a budget of tens of seconds. azure-core's RetryPolicy
(inside this policy) still owns throttling and 5xx; this policy never resends what it answered
with a status. Past the budget the read fails as `UnreadableAnswer`, an infrastructure error that
the Azure layer does not send again (translate.NOT_RESENT): no backoff is multiplied.

An empty 202 is not unreadable: it is how ARM says an asynchronous operation still runs (the
recordings: a delete's Location answered 92 empty 202s over ~9 min before its 204; ACR's importImage
polls the same way for minutes). The LRO poller reads it and looks again; resending it here would
spend the read budget on an operation that is merely long and fail it as lost (exit 7).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from azure.core.exceptions import DecodeError, ServiceRequestError, ServiceResponseError
from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.policies import HTTPPolicy

READ_BUDGET_S = 30.0  # how long one read may keep trying before it is reported lost (exit 7)
FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 8.0
# Location-header operation results may end in an empty 200 by design; status polls never do
_MAY_BE_EMPTY = ("operationresults/",)


class UnreadableAnswer(ServiceResponseError):
    """A read that got no readable answer within its budget."""


def pause(attempt: int, first: float, *, rng: Callable[[], float] = random.random) -> float:
    """Exponential backoff with equal jitter: half the step for sure, the other half at random."""
    step = min(MAX_PAUSE_S, first * 2.0 ** (attempt - 1))
    return step / 2 + rng() * step / 2


def unreadable(method: str, url: str, status: int, body: bytes) -> str | None:
    """Why a read's 2xx answer cannot be used, or None when it can (a streamed body counts as readable)."""
    if method != "GET" or not 200 <= status < 300 or status == 204:
        return None
    if not body.strip():
        if status == 202:  # Accepted: the operation is still running, the poller looks again
            return None
        return None if any(part in url.lower() for part in _MAY_BE_EMPTY) else f"an empty {status}"
    try:  # every ARM read answers JSON; a cut-off or foreign (proxy, captive portal) body is no answer
        json.loads(body)
    except ValueError:
        return f"a {status} whose body is not JSON"
    return None


class ReadRetryPolicy(HTTPPolicy):  # type: ignore[type-arg]
    """Outermost policy of every ARM client (clients.py): resend an unreadable GET, backing off."""

    def __init__(
        self,
        *,
        first_pause: float = FIRST_PAUSE_S,
        budget: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.first_pause, self.sleep = first_pause, sleep
        self.budget = READ_BUDGET_S if budget is None else budget

    def send(self, request: PipelineRequest) -> PipelineResponse:  # type: ignore[type-arg]
        http = request.http_request
        if http.method.upper() != "GET" or request.context.options.get("stream"):
            return self.next.send(request)
        deadline = time.monotonic() + self.budget
        attempt = 0
        while True:
            attempt += 1
            why: str | None
            try:
                response = self.next.send(request)
                answer: Any = response.http_response
                why = unreadable("GET", str(http.url), answer.status_code, _body(answer))
                if why is None:
                    return response
            except (DecodeError, ServiceRequestError, ServiceResponseError) as exc:
                why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
            wait = pause(attempt, self.first_pause)
            if time.monotonic() + wait > deadline:
                url = str(http.url).split("?")[0]
                raise UnreadableAnswer(
                    f"no readable answer to GET {url} in {attempt} tries over "
                    f"{self.budget - max(0.0, deadline - time.monotonic()):.0f} s (last: {why})"
                )
            self.sleep(wait)


def read_retry_policy(polling_interval: float) -> ReadRetryPolicy:
    """The policy for a client: its first pause no longer than half the polling interval, so a
    fast-polling emulator run retries as quickly as it polls."""
    return ReadRetryPolicy(first_pause=min(FIRST_PAUSE_S, max(0.01, polling_interval / 2)))


def _body(answer: Any) -> bytes:
    try:
        data = answer.body()
    except Exception:  # a streamed answer not read yet: not ours to judge
        return b"{}"
    return bytes(data or b"")
