"""Requests sent side by side before the first answer of a process: a refused api-version goes out
once, not once per thread (a run's preflight and its pairs start together; with two suites on two
cores three requests went out at the refused version before the first refusal was learnt)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest

from aca_gpu.azure import api_versions

URL = "https://management.azure.com/subscriptions/s/providers/Microsoft.App/locations/eastus/usages"
REFUSAL = '{"error": {"code": "InvalidApiVersionParameter", "message": "not in this region"}}'


class _Answer:
    def __init__(self, status: int, body: str) -> None:
        self.status_code, self._body = status, body

    def read(self) -> bytes:
        return self._body.encode()

    def text(self) -> str:
        return self._body


class _Response:
    def __init__(self, status: int, body: str) -> None:
        self.http_response = _Answer(status, body)


class _Arm:
    """Refuses the newest stable version, slowly: the other requests are sent while it answers."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self._lock = threading.Lock()

    def send(self, request: PipelineRequest) -> Any:  # type: ignore[type-arg]
        version = api_versions._version_of(request.http_request.url)
        with self._lock:
            self.sent.append(version)
        if version == api_versions.STABLE[0]:
            time.sleep(0.5)
            return _Response(400, REFUSAL)
        return _Response(200, "{}")


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    api_versions.forget()
    yield
    api_versions.forget()


def test_a_refused_version_goes_out_once_when_requests_start_together() -> None:
    arm = _Arm()
    policy = api_versions.ApiVersionFallback()
    policy.next = arm  # type: ignore[assignment]
    start = threading.Barrier(4)
    statuses: list[int] = []

    def request() -> None:
        start.wait()
        url = f"{URL}?api-version={api_versions.STABLE[0]}"
        answer = policy.send(PipelineRequest(HttpRequest("GET", url), PipelineContext(None)))
        statuses.append(answer.http_response.status_code)

    threads = [threading.Thread(target=request) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert statuses == [200] * 4
    assert arm.sent.count(api_versions.STABLE[0]) == 1, arm.sent
    assert arm.sent.count(api_versions.STABLE[1]) == 4, arm.sent
    assert api_versions.working(api_versions.STABLE) == api_versions.STABLE[1]


def test_a_first_request_that_fails_lets_the_others_go() -> None:
    """A first request that ends in an error (the network) still releases the ones waiting on it."""

    class Broken(_Arm):
        def send(self, request: PipelineRequest) -> Any:  # type: ignore[type-arg]
            if not self.sent:
                self.sent.append("boom")
                time.sleep(0.2)
                raise ConnectionError("reset")
            return super().send(request)

    arm = Broken()
    policy = api_versions.ApiVersionFallback()
    policy.next = arm  # type: ignore[assignment]
    url = f"{URL}?api-version={api_versions.STABLE[1]}"
    with pytest.raises(ConnectionError):
        policy.send(PipelineRequest(HttpRequest("GET", url), PipelineContext(None)))
    began = time.monotonic()
    answer = policy.send(PipelineRequest(HttpRequest("GET", url), PipelineContext(None)))
    assert answer.http_response.status_code == 200 and time.monotonic() - began < 5
