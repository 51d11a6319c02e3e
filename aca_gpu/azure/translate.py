"""azure-core exceptions and ARM error codes → aca_gpu.errors types, keeping the code and message.

One table, consulted everywhere, so an ARM code maps to the same exit code (docs/exit-codes.md) whichever
call raised it. Codes and texts are the ones recorded traffic, Microsoft's docs and public issues show.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from aca_gpu.errors import (
    AcaGpuError,
    AuthError,
    BadInput,
    CloudError,
    InfraError,
    NotFound,
    PreflightRefused,
    QuotaError,
    WaitTimedOut,
)

T = TypeVar("T")

# ARM error code → error type. Codes are compared case-insensitively.
CODE_TABLE: dict[str, type[AcaGpuError]] = {
    # ARM: provider not registered for the subscription; `acagpu up` registers Microsoft.App first
    "MissingSubscriptionRegistration": PreflightRefused,
    # ARM auth failures (RBAC deny, expired or foreign token)
    "AuthorizationFailed": AuthError,
    "InvalidAuthenticationToken": AuthError,
    "InvalidAuthenticationTokenTenant": AuthError,
    "AuthenticationFailed": AuthError,
    "ExpiredAuthenticationToken": AuthError,
    "LinkedAuthorizationFailed": AuthError,
    # recordings: GET before create → 404 ResourceNotFound; ARM: ResourceGroupNotFound
    "ResourceNotFound": NotFound,
    "ResourceGroupNotFound": NotFound,
    "NotFound": NotFound,
    # quota and capacity (exact GPU-quota code UNCONFIRMED, so the text rules below back these up)
    "QuotaExceeded": QuotaError,
    "ManagedEnvironmentQuotaExceeded": QuotaError,
    "SubscriptionQuotaExceeded": QuotaError,
    "MaxNumberOfRegionalEnvironmentsInSubExceeded": QuotaError,
    "SkuNotAvailable": QuotaError,
    "AllocationFailed": QuotaError,
    "ZonalAllocationFailed": QuotaError,
    "OverconstrainedAllocationRequest": QuotaError,
    # CPU/memory combination the profile does not allow
    "ContainerAppInvalidResourceTotal": BadInput,
    # min/max counts on a Consumption GPU profile; unknown profile type in the region
    "WorkloadProfileMinimumCountNotSupported": BadInput,
    "WorkloadProfilePropertyNotSupported": BadInput,
    "WorkloadProfileTypeNotSupported": BadInput,
    "InvalidWorkloadProfileType": BadInput,
    # ARM request validation
    "InvalidParameter": BadInput,
    "InvalidRequestContent": BadInput,
    "InvalidResourceName": BadInput,
    "LocationNotAvailableForResourceType": PreflightRefused,
    "NoRegisteredProviderFound": PreflightRefused,
    # 409 on a group's PUT while a delete of the same name runs (an environment made again at once)
    "ResourceGroupBeingDeleted": PreflightRefused,
}

# Message patterns for codes that vary or are too generic to map alone (e.g. OperationNotAllowed).
TEXT_RULES: tuple[tuple[re.Pattern[str], type[AcaGpuError]], ...] = (
    # "Maximum Allowed Cores exceeded for the Managed Environment ..."
    (re.compile(r"maximum allowed cores exceeded", re.I), QuotaError),
    (re.compile(r"\bquota\b", re.I), QuotaError),
    (re.compile(r"insufficient capacity|not enough capacity|capacity is not available", re.I), QuotaError),
    # "Workload Profile property 'MinimumCount' is not supported for Consumption_GPU_NC8as_T4"
    (re.compile(r"property '\w+' is not supported", re.I), BadInput),
    # "The total requested CPU and memory resources for this application ... is invalid"
    (re.compile(r"total requested cpu and memory", re.I), BadInput),
    (re.compile(r"is not registered to use namespace", re.I), PreflightRefused),
)

STATUS_TABLE: dict[int, type[AcaGpuError]] = {401: AuthError, 403: AuthError, 404: NotFound}
# statuses azure-core retries (429 with Retry-After, 5xx): still failing afterwards is infrastructure
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

HINTS: dict[type[AcaGpuError], str] = {
    AuthError: "run `az login` (or check the service principal's role on the subscription)",
    QuotaError: "request GPU quota for Azure Container Apps in this region through the Quota Management "
    "System (Azure portal → Quotas), or try other regions with --regions",
    PreflightRefused: "az provider register --namespace Microsoft.App",
}
# Hints that belong to one code rather than to its kind of error.
CODE_HINTS: dict[str, str] = {
    "resourcegroupbeingdeleted": "its earlier delete is still running (minutes on Azure): run this again "
    "once `acagpu status` no longer lists the group, or pick another name",
}
# An environment's own quota is requested on that environment's Quota page, not through QMS
# (Microsoft Learn, "Quotas for Azure Container Apps").
ENVIRONMENT_QUOTA_HINT = (
    "request more on the environment's Quota page in the Azure portal, or try other regions with --regions"
)


def _hint(kind: type[AcaGpuError], code: str | None, message: str) -> str | None:
    if (code or "").lower() in CODE_HINTS:
        return CODE_HINTS[(code or "").lower()]
    if kind is QuotaError and (
        (code or "").lower() == "managedenvironmentquotaexceeded" or "managed environment" in message.lower()
    ):
        return ENVIRONMENT_QUOTA_HINT
    return HINTS.get(kind)


def classify(code: str | None, status: int | None, message: str) -> type[AcaGpuError]:
    """The error type for an ARM failure: code first, then message text, then HTTP status."""
    if code:
        for known, kind in CODE_TABLE.items():
            if known.lower() == code.lower():
                return kind
    for pattern, kind in TEXT_RULES:
        if pattern.search(message):
            return kind
    if status is not None and status in STATUS_TABLE:
        return STATUS_TABLE[status]
    return CloudError


def make_error(action: str, target: str, code: str | None, status: int | None, message: str) -> AcaGpuError:
    kind = classify(code, status, message)
    if kind is CloudError and (status in TRANSIENT_STATUS or (status is not None and 200 <= status < 300)):
        # (a 2xx raised as an error is an answer that could not be used: an LRO poll without a body)
        # azure-core already retried these; what is left is the service being unwell, not the GPU
        kind = InfraError
    summary = _one_line(message) or (f"HTTP {status}" if status else "unknown error")
    text = f"{action} {target}: {summary}" if target else f"{action}: {summary}"
    if code and code not in summary:
        text += f" ({code})"
    return kind(text, code=code or (str(status) if status else None), hint=_hint(kind, code, message))


def arm_error_fields(body: Any) -> tuple[str | None, str]:
    """(code, message) from an ARM error envelope, a proxy `{"Error": {...}}` body, or raw text."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, body.strip()
    if isinstance(body, dict):
        err = body.get("error") or body.get("Error") or body
        if isinstance(err, dict):
            code = err.get("code") or err.get("Code")
            message = err.get("message") or err.get("Message") or ""
            return (str(code) if code else None), str(message)
    return None, str(body)


def translate_exception(exc: BaseException, action: str, target: str = "") -> AcaGpuError | None:
    """The aca_gpu error for an azure-core exception, or None when `exc` is not one we know."""
    from azure.core.exceptions import (
        AzureError,
        ClientAuthenticationError,
        DecodeError,
        DeserializationError,
        HttpResponseError,
        ResourceNotFoundError,
        ServiceRequestError,
        ServiceResponseError,
    )

    if isinstance(exc, AcaGpuError):
        return exc
    if isinstance(exc, ClientAuthenticationError):
        # azure-identity's "DefaultAzureCredential failed to retrieve a token" lands here too
        code, message = _http_fields(exc)
        return AuthError(
            f"{action} {target}: authentication failed: {_one_line(message)}".replace("  ", " "),
            code=code or "ClientAuthenticationError",
            hint=HINTS[AuthError],
        )
    if isinstance(exc, DecodeError):  # a 2xx whose body is empty, cut off or not JSON
        return InfraError(
            f"{action} {target}: the answer could not be read ({_one_line(str(exc))[:120]})".replace(
                "  ", " "
            ),
            code="DecodeError",
        )
    if isinstance(exc, HttpResponseError):
        status = exc.status_code or (404 if isinstance(exc, ResourceNotFoundError) else None)
        if _body_is_not_json(exc):
            # a gateway's or load balancer's page (HTML, plain text) is not the service speaking:
            # name who answered what in one line rather than paste the page into the error line
            said = f"{_service_of(exc)} answered {status or 'an error'} (not JSON)"
            return InfraError(
                f"{action} {target}: {said}" if target else f"{action}: {said}", code=str(status)
            )
        code, message = _http_fields(exc)
        return make_error(action, target, code, status, message)
    if type(exc).__name__ == "UnreadableAnswer":  # reads.py spent its budget reading again
        return InfraError(
            f"{action} {target}: {_one_line(str(exc))}".replace("  ", " "), code="UnreadableAnswer"
        )
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        endpoint = _endpoint_of(exc)
        return InfraError(
            f"{action} {target}: cannot reach {endpoint}: {_one_line(str(exc))[:200]}".replace("  ", " "),
            code=type(exc).__name__,
        )
    if isinstance(exc, TimeoutError):
        return WaitTimedOut(f"{action} {target}: timed out", code="Timeout")
    if isinstance(exc, (AzureError, DeserializationError, ValueError)):
        return InfraError(
            f"{action} {target}: unreadable answer ({type(exc).__name__}: {_one_line(str(exc))[:120]})",
            code=type(exc).__name__,
        )
    return None


@contextmanager
def translate_errors(action: str, target: str = "") -> Iterator[None]:
    """Re-raise azure-core exceptions raised inside as aca_gpu.errors types (cause kept)."""
    try:
        yield
    except AcaGpuError:
        raise
    except Exception as exc:
        translated = translate_exception(exc, action, target)
        if translated is None:
            raise
        raise translated from exc


IDEMPOTENT_ATTEMPTS = 5
# what azure-core's RetryPolicy (clients.RETRY_OPTIONS) already sent again, with its own backoff
CORE_RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# infrastructure errors that already include their own repeated reads: never sent again
NOT_RESENT = frozenset({"NotFoundAfterCreate", "UnreadableAnswer"})


def _core_already_retried(exc: InfraError) -> bool:
    """True when azure-core retried this status itself: sending it again would only multiply a
    service outage's backoff. Its RetryPolicy resends a POST or PATCH only after 500, 503 or 504,
    or when the answer carries Retry-After; other methods after any of CORE_RETRIED_STATUS."""
    cause = exc.__cause__
    status = getattr(cause, "status_code", None)
    if status not in CORE_RETRIED_STATUS:
        return False
    response = getattr(cause, "response", None)
    method = str(getattr(getattr(response, "request", None), "method", "") or "").upper()
    if method not in ("POST", "PATCH"):
        return True
    headers = getattr(response, "headers", None) or {}
    return status in (500, 503, 504) or "retry-after" in {str(k).lower() for k in headers}


def retrying(action: str, target: str, call: Callable[[], T], *, pause: float = 0.5) -> T:
    """`call()` for an idempotent request (GET, PUT, DELETE, a safe POST), tried again after an
    infrastructure failure that azure-core does not retry itself: a 2xx with an empty, cut-off or
    non-JSON body, a connection lost mid-answer."""
    for attempt in range(1, IDEMPOTENT_ATTEMPTS + 1):
        try:
            with translate_errors(action, target):
                return call()
        except InfraError as exc:
            if attempt == IDEMPOTENT_ATTEMPTS or exc.code in NOT_RESENT or _core_already_retried(exc):
                raise
            time.sleep(pause * attempt)
    raise AssertionError("unreachable")


def or_none(action: str, target: str, call: Callable[[], T]) -> T | None:
    """`call()`, or None when ARM says the resource does not exist (404 / *NotFound)."""
    try:
        return retrying(action, target, call)
    except NotFound:
        return None


def is_not_found(exc: BaseException) -> bool:
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    if isinstance(exc, ResourceNotFoundError):
        return True
    return isinstance(exc, HttpResponseError) and exc.status_code == 404


def _http_fields(exc: Any) -> tuple[str | None, str]:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) if error is not None else None
    message = getattr(error, "message", None) if error is not None else None
    if not code:
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                body_code, body_message = arm_error_fields(response.text())
            except Exception:
                body_code, body_message = None, ""
            code = body_code
            message = message or body_message
    return (str(code) if code else None), str(message or getattr(exc, "message", None) or exc)


def _body_is_not_json(exc: Any) -> bool:
    """True when an error answer carries a body that is neither JSON nor Storage's XML (a page)."""
    response = getattr(exc, "response", None)
    if response is None:
        return False
    try:
        text = response.text()
    except Exception:
        return False
    if not text or not text.strip():
        return False  # no body at all: the status line says it (make_error's `HTTP 503`)
    if getattr(exc, "error_code", None) or text.lstrip()[:6].lower() in ("<?xml ", "<error"):
        return False  # Azure Storage speaks XML: its error code is the answer
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


# who answered, by the request's path or host (the emulator serves every API on one host)
_SERVICES = (
    ("/providers/microsoft.resourcegraph/", "Resource Graph"),
    (".file.core.", "Azure Files"),
    (".blob.core.", "Azure Blob Storage"),
    (".azurecr.io", "the container registry"),
    ("/providers/microsoft.operationalinsights/", "Log Analytics"),
)


def _service_of(exc: Any) -> str:
    url = _endpoint_of(exc).lower()
    for marker, name in _SERVICES:
        if marker in url:
            return name
    return "Azure Resource Manager" if url.startswith("http") else "the service"


def _endpoint_of(exc: Any) -> str:
    for holder in (getattr(exc, "response", None), exc):
        request = getattr(holder, "request", None) if holder is not None else None
        url = getattr(request, "url", None)
        if url:
            return str(url).split("?")[0]
    return "the Azure Resource Manager endpoint"


def _one_line(text: str) -> str:
    first = " ".join(str(text).split())
    return first[:400]
