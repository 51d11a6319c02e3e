"""ARM codes and azure-core exceptions map to the documented exit codes, keeping code and message."""

from __future__ import annotations

import json

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
)
from azure.core.pipeline.transport import HttpRequest as TransportRequest
from azure.core.rest import HttpRequest
from azure.core.rest._http_response_impl import HttpResponseImpl

from aca_gpu.azure.translate import arm_error_fields, classify, make_error, or_none, translate_errors
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


def arm_response(status: int, code: str, message: str, method: str = "PUT") -> HttpResponseImpl:
    """A complete ARM error response without a transport: the envelope body, JSON content type."""
    request = HttpRequest(method, "https://management.azure.com/subscriptions/s/resourceGroups/rg")
    response = HttpResponseImpl(
        request=request,
        internal_response=None,
        status_code=status,
        headers={"content-type": "application/json"},
        reason="x",
        content_type="application/json",
        block_size=4096,
        stream_download_generator=lambda *a, **k: iter(()),
    )
    response._content = json.dumps({"error": {"code": code, "message": message}}).encode()
    return response


def arm_error(status: int, code: str, message: str) -> HttpResponseError:
    """An HttpResponseError as the SDK raises it: ARM envelope body, `.error` parsed from it."""
    response = arm_response(status, code, message)
    from azure.mgmt.core.exceptions import ARMErrorFormat

    return HttpResponseError(response=response, error_format=ARMErrorFormat)


CASES = [
    # (status, code, message, expected type, exit code)
    (
        409,
        "MissingSubscriptionRegistration",
        "The subscription is not registered to use namespace 'Microsoft.App'.",
        PreflightRefused,
        2,
    ),
    (403, "AuthorizationFailed", "The client does not have authorization to perform action", AuthError, 2),
    (401, "InvalidAuthenticationToken", "The access token is invalid.", AuthError, 2),
    (
        404,
        "ResourceNotFound",
        "The Resource 'Microsoft.App/managedEnvironments/x' was not found.",
        NotFound,
        2,
    ),
    (404, "ResourceGroupNotFound", "Resource group 'rg' could not be found.", NotFound, 2),
    (400, "QuotaExceeded", "Operation results in exceeding quota limits of Core.", QuotaError, 3),
    (400, "ManagedEnvironmentQuotaExceeded", "GPU quota exceeded", QuotaError, 3),
    (400, "SubscriptionQuotaExceeded", "subscription quota", QuotaError, 3),
    (409, "SkuNotAvailable", "The requested size is not available", QuotaError, 3),
    (409, "AllocationFailed", "Allocation failed", QuotaError, 3),
    # §5.3 text without a specific code
    (
        400,
        "ContainerAppOperationError",
        "Maximum Allowed Cores exceeded for the Managed Environment. Please check "
        "https://learn.microsoft.com/en-us/azure/container-apps/quotas for resource limits",
        QuotaError,
        3,
    ),
    (
        409,
        "OperationNotAllowed",
        "Operation could not be completed as it results in exceeding approved quota",
        QuotaError,
        3,
    ),
    (
        400,
        "ContainerAppInvalidResourceTotal",
        "The total requested CPU and memory resources for this application (CPU: 8, memory: 12) is invalid.",
        BadInput,
        2,
    ),
    (
        400,
        "WorkloadProfileInvalid",
        "Workload Profile property 'MinimumCount' is not supported for Consumption_GPU_NC8as_T4",
        BadInput,
        2,
    ),
    # 5xx after azure-core's own retries: the service is unwell, not the GPU (exit 7, never 5)
    (500, "InternalServerError", "Something went wrong", InfraError, 7),
    (503, "ServiceUnavailable", "Try later", InfraError, 7),
    (429, "TooManyRequests", "Throttled", InfraError, 7),
]


@pytest.mark.parametrize(("status", "code", "message", "kind", "exit_code"), CASES, ids=[c[1] for c in CASES])
def test_arm_code_table(
    status: int, code: str, message: str, kind: type[AcaGpuError], exit_code: int
) -> None:
    with pytest.raises(AcaGpuError) as caught, translate_errors("create environment", "cae-acagpu-abc123"):
        raise arm_error(status, code, message)
    err = caught.value
    assert type(err) is kind
    assert err.exit_code == exit_code
    assert err.code == code
    assert "cae-acagpu-abc123" in err.message and message.split()[0] in err.message
    assert isinstance(err.__cause__, HttpResponseError)


def test_status_only_fallback() -> None:
    assert classify(None, 403, "forbidden") is AuthError
    assert classify(None, 404, "gone") is NotFound
    assert classify("unknownCode", 418, "teapot") is CloudError
    assert classify("quotaexceeded", 400, "") is QuotaError  # case-insensitive codes


def test_client_authentication_error() -> None:
    with pytest.raises(AuthError) as caught, translate_errors("list resource groups"):
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")
    assert caught.value.exit_code == 2 and "az login" in (caught.value.hint or "")


def test_connection_error_names_the_endpoint() -> None:
    exc = ServiceRequestError("Connection refused")
    exc.request = TransportRequest("GET", "https://127.0.0.1:9/subscriptions/s?api-version=1")  # type: ignore[attr-defined]
    with pytest.raises(InfraError) as caught, translate_errors("read resource group", "rg"):
        raise exc
    assert "https://127.0.0.1:9/subscriptions/s" in caught.value.message
    assert caught.value.exit_code == 7


def test_unreadable_2xx_body_is_infrastructure() -> None:
    from azure.core.exceptions import DecodeError

    with pytest.raises(InfraError) as caught, translate_errors("read container app", "a"):
        raise DecodeError("JSON is invalid: Expecting value: line 1 column 1 (char 0)")
    assert caught.value.code == "DecodeError" and "could not be read" in caught.value.message


def test_lro_timeout_is_wait_timed_out() -> None:
    with pytest.raises(WaitTimedOut), translate_errors("create environment", "e"):
        raise TimeoutError()


def test_unknown_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), translate_errors("x"):
        raise KeyError("k")


def test_or_none_on_not_found_only() -> None:
    def missing() -> None:
        raise ResourceNotFoundError("nope")

    def broken() -> None:
        raise arm_error(500, "InternalServerError", "boom")

    assert or_none("read", "x", missing) is None
    with pytest.raises(InfraError):
        or_none("read", "x", broken)


def test_arm_error_fields_shapes() -> None:
    assert arm_error_fields('{"error":{"code":"A","message":"m"}}') == ("A", "m")
    assert arm_error_fields(b'{"Error":{"Code":"ClusterExecFailure","Message":"x"}}') == (
        "ClusterExecFailure",
        "x",
    )
    assert arm_error_fields("plain") == (None, "plain")


def test_quota_hints_name_where_to_ask() -> None:
    """Subscription quota is asked for through QMS; an environment's quota on its own Quota page."""
    sub = make_error("create container app", "x", "QuotaExceeded", 400, "quota exceeded for GPUs")
    env = make_error(
        "create container app",
        "x",
        "MaxNumberOfGpuCoresExceeded",
        400,
        "Maximum Allowed Cores exceeded for the Managed Environment. Please check ...",
    )
    assert sub.exit_code == env.exit_code == 3
    assert "Quota Management System" in (sub.hint or "")
    assert "environment's Quota page" in (env.hint or "")


def test_idempotent_reads_survive_several_unreadable_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreadable 2xx (empty, cut-off, non-JSON) is read again, up to the attempt limit; the last
    failure is an infrastructure error, never a verdict."""
    from aca_gpu.azure import translate

    monkeypatch.setattr("aca_gpu.azure.translate.time.sleep", lambda _s: None)
    calls: list[int] = []

    def flaky(failures: int) -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise InfraError("read resource group rg: unreadable answer")
        return "ok"

    assert translate.retrying("read", "rg", lambda: flaky(translate.IDEMPOTENT_ATTEMPTS - 1)) == "ok"
    assert len(calls) == translate.IDEMPOTENT_ATTEMPTS >= 4  # three empty answers in a row are survived
    calls.clear()
    with pytest.raises(InfraError):
        translate.retrying("read", "rg", lambda: flaky(translate.IDEMPOTENT_ATTEMPTS))
    assert len(calls) == translate.IDEMPOTENT_ATTEMPTS


@pytest.mark.parametrize(
    ("method", "status", "sent"),
    [
        ("GET", 503, 1),  # azure-core already retried it with its backoff: not multiplied
        ("PUT", 429, 1),
        ("POST", 503, 1),  # azure-core resends a POST or PATCH after 500/503/504 only
        ("POST", 502, 5),  # ... so a safe POST that got 502 is ours to send again
        ("PATCH", 429, 5),
    ],
)
def test_a_status_azure_core_already_retried_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch, method: str, status: int, sent: int
) -> None:
    from aca_gpu.azure import translate

    monkeypatch.setattr("aca_gpu.azure.translate.time.sleep", lambda _s: None)
    response = arm_response(status, "Unwell", "unwell", method)
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise HttpResponseError(response=response, message="unwell")

    with pytest.raises(InfraError):
        translate.retrying("read", "rg", failing)
    assert len(calls) == sent
