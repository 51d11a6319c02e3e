"""api-version checks, as ARM does them: required on every call, and one the provider knows."""

from __future__ import annotations

from contextvars import ContextVar

from aca_gpu.emulator.arm import APP_SUPPORTED_VERSIONS, ArmError

# The api-version of the ARM request being answered (each request runs in its own task): Azure shapes
# its answers by it, and some fields arrived with newer versions.
REQUEST_VERSION: ContextVar[str] = ContextVar("request_api_version", default="")
# recorded (November 2025): answers at 2025-07-01 carry fields and defaults that the 2023-2024 ones
# (up to 2024-03-01) do not, and 2025-10-02-preview adds a few more (and `detailedStatus`)
SHAPE_2025_SINCE = "2025-07-01"
SHAPE_2025_10_SINCE = "2025-10-02"

APP_VERSIONS = tuple(v.strip() for v in APP_SUPPORTED_VERSIONS.split(","))
# Microsoft.Resources: azure-mgmt-resource 26 sends 2025-04-01; azure-mgmt-core's auto-registration
# policy uses 2016-02-01; the Azure CLI reads providers at 2022-09-01 / 2024-11-01 and subscriptions
# and tenants at 2022-12-01.
RESOURCES_VERSIONS = (
    "2016-02-01",
    "2016-06-01",
    "2020-01-01",
    "2021-01-01",
    "2019-10-01",
    "2020-06-01",
    "2021-04-01",
    "2022-09-01",
    "2022-12-01",
    "2023-07-01",
    "2024-03-01",
    "2024-07-01",
    "2024-11-01",
    "2025-03-01",
    "2025-04-01",
)


# Microsoft.Authorization: the Azure CLI uses 2022-04-01 (roles, assignments) and 2018-01-01-preview.
AUTHORIZATION_VERSIONS = ("2015-07-01", "2018-01-01-preview", "2020-04-01-preview", "2022-04-01")


# Microsoft.ResourceGraph: azure-mgmt-resourcegraph 8 sends 2021-03-01; the Azure CLI 2022-10-01.
GRAPH_VERSIONS = ("2019-04-01", "2020-04-01-preview", "2021-03-01", "2022-10-01", "2024-04-01")


def shape_2025(since: str = SHAPE_2025_SINCE) -> bool:
    """Is the request being answered at an api-version that gets the shapes of `since` or later?"""
    return REQUEST_VERSION.get()[:10] >= since


def answers_detailed_status(api_version: str | None) -> bool:
    """Does a job execution read at this api-version carry `detailedStatus`? Recorded: at
    2025-10-02-preview, not at 2025-07-01."""
    return (api_version or "")[:10] >= SHAPE_2025_10_SINCE


def _versions(namespace: str | None) -> tuple[str, ...]:
    known = {
        "microsoft.app": APP_VERSIONS,
        "microsoft.authorization": AUTHORIZATION_VERSIONS,
        "microsoft.resourcegraph": GRAPH_VERSIONS,
    }
    return known.get((namespace or "").lower(), RESOURCES_VERSIONS)


def supported(namespace: str | None) -> str:
    return ", ".join(_versions(namespace))


def check(api_version: str | None, *, namespace: str) -> None:
    if not api_version:
        raise ArmError(
            "The api-version query parameter (?api-version=) is required for all requests.",
            code="MissingApiVersionParameter",
        )
    known = _versions(namespace)
    if api_version not in known:
        raise ArmError(
            f"The api-version '{api_version}' is invalid. The supported versions are "
            f"'{','.join(sorted(known, reverse=True))}'.",
            code="InvalidApiVersionParameter",
        )
