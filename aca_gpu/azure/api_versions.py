"""Microsoft.App api-versions, in one place: a stable fallback chain and the preview-only calls.

New versions roll out region by region, and ARM answers `NoRegisteredProviderFound` or
`InvalidApiVersionParameter` where one has not arrived yet (Azure/azure-cli#28368, #32181). One pipeline
policy (`ApiVersionFallback`, installed by clients.py as the SDK's custom hook) sees every Microsoft.App
request, SDK call, raw call and LRO poll alike: when the version a request names is refused, it resends
with the next version of that request's chain and remembers, for this process, which version worked, so
later requests start there. Requests sent side by side before the first of a chain has its answer wait
for it (bounded), so a refused version goes out once, not once per thread.

- Stable: the SDK's default `2026-07-01`, then `2026-01-01`, then `2025-07-01`.
- Preview-only (job `getAuthToken`, an execution's `replicas`: in no public spec; the Azure CLI
  uses `2023-11-02-preview`): newer previews first, `2023-11-02-preview` last. `preview_call`
  turns "every one refused" into one clear error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.policies import HTTPPolicy

from aca_gpu.errors import AcaGpuError, CloudError

T = TypeVar("T")

STABLE = ("2026-07-01", "2026-01-01", "2025-07-01")
PREVIEW = ("2026-03-02-preview", "2025-02-02-preview", "2024-10-02-preview", "2023-11-02-preview")
CHAINS = (STABLE, PREVIEW)
REFUSALS = frozenset({"noregisteredproviderfound", "invalidapiversionparameter"})
NAMESPACE = "/providers/microsoft.app/"

_lock = threading.Lock()
_working: dict[tuple[str, ...], str] = {}  # chain -> the version that last worked in this process
# chain -> set once this process's first request of it has its answer: requests made side by side
# before that (a run's preflight and its pairs) wait for it, so a refused version goes out once
_settled: dict[tuple[str, ...], threading.Event] = {}
FIRST_ANSWER_WAIT_S = 60.0


def working(chain: tuple[str, ...]) -> str:
    """The version this process uses now for `chain` (its first until one was refused)."""
    with _lock:
        return _working.get(chain, chain[0])


def forget() -> None:
    """Start over from each chain's first version (tests; a long-lived process after a rollout)."""
    with _lock:
        _working.clear()
        for event in _settled.values():
            event.set()  # nobody waits on a first answer that no longer counts
        _settled.clear()


def _first(chain: tuple[str, ...]) -> threading.Event | None:
    """The event to set when this request is the chain's first in this process; else None, once the
    first has its answer (or FIRST_ANSWER_WAIT_S passed: a slow first answer never blocks the rest)."""
    with _lock:
        event = _settled.get(chain)
        if event is None:
            _settled[chain] = event = threading.Event()
            return event
    event.wait(FIRST_ANSWER_WAIT_S)
    return None


def _remember(chain: tuple[str, ...], version: str) -> None:
    with _lock:
        _working[chain] = version


def _version_of(url: str) -> str | None:
    return dict(parse_qsl(urlsplit(url).query)).get("api-version")


def with_version(url: str, version: str) -> str:
    parts = urlsplit(url)
    query = [
        (k, version if k == "api-version" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query, safe=":/$,'")))


def refused(status: int, body: str) -> bool:
    """The answer ARM gives for a version this region or provider does not serve."""
    if status not in (400, 404):
        return False
    try:
        doc = json.loads(body)
    except ValueError:
        return False
    error = doc.get("error") if isinstance(doc, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return str(code or "").lower() in REFUSALS


def _error_text(answer: Any) -> str:
    """The body of a 400/404 (read first: a streamed answer has not been read yet); else ''."""
    if answer.status_code not in (400, 404):
        return ""
    try:
        read = getattr(answer, "read", None)
        if callable(read):
            read()
        return str(answer.text())
    except Exception:  # an unreadable error body is simply not a version refusal
        return ""


class ApiVersionFallback(HTTPPolicy):  # type: ignore[type-arg]
    """Resend a refused Microsoft.App request with the next version of its chain (see the module doc)."""

    def send(self, request: PipelineRequest) -> PipelineResponse:  # type: ignore[type-arg]
        http = request.http_request
        current = _version_of(http.url)
        chain = next((c for c in CHAINS if current in c), None)
        if chain is None or NAMESPACE not in http.url.lower():
            return self.next.send(request)
        first = _first(chain)
        try:
            return self._send(request, chain, current)
        finally:
            if first is not None:
                first.set()

    def _send(
        self,
        request: PipelineRequest,  # type: ignore[type-arg]
        chain: tuple[str, ...],
        current: str | None,
    ) -> PipelineResponse:  # type: ignore[type-arg]
        http = request.http_request
        known = working(chain)
        start = max(chain.index(current or chain[0]), chain.index(known))
        response: PipelineResponse | None = None  # type: ignore[type-arg]
        for version in chain[start:]:
            http.url = with_version(http.url, version)
            response = self.next.send(request)
            answer = response.http_response
            if not refused(answer.status_code, _error_text(answer)):
                if version != known:
                    _remember(chain, version)
                return response
        assert response is not None
        return response


def preview_call(what: str, call: Callable[[str], T]) -> T:
    """`call(api_version)` for a preview-only operation; refused at every preview version → one error."""
    try:
        return call(working(PREVIEW))
    except AcaGpuError as exc:
        if (exc.code or "").lower() not in REFUSALS:
            raise
        raise CloudError(
            f"{what}: every preview api-version was refused ({', '.join(PREVIEW)}); this call exists only "
            f"in preview versions of Microsoft.App: {exc.message}",
            code="PreviewApiUnavailable",
        ) from exc
