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
# Each Microsoft.App resource type has its own list: the version it first appeared at, then every
# later one. Recorded per type in the `api-supported-versions` header (tests/fixtures/*-recordings):
# jobs, their executions and their operations from 2022-11-01-preview (the official spec's first
# Jobs.json), the workload-profile-type catalogue from 2022-06-01-preview, the rest from 2022-03-01.
APP_TYPE_SINCE = {
    "jobs": "2022-11-01-preview",
    "locations/containerappsjobOperationStatuses": "2022-11-01-preview",
    "locations/containerappsjobOperationResults": "2022-11-01-preview",
    "locations/availableManagedEnvironmentsWorkloadProfileTypes": "2022-06-01-preview",
}
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


# Microsoft.Storage: azure-mgmt-storage 25.3 sends 2026-09-01; the Azure CLI 2023-05-01 / 2024-01-01.
STORAGE_VERSIONS = (
    "2022-09-01",
    "2023-01-01",
    "2023-05-01",
    "2024-01-01",
    "2025-01-01",
    "2025-06-01",
    "2026-09-01",
)


# Microsoft.ContainerRegistry: azure-mgmt-containerregistry 15.0 sends 2025-11-01; the Azure CLI 2025-04-01.
REGISTRY_VERSIONS = ("2023-07-01", "2023-11-01-preview", "2025-04-01", "2025-11-01")


# Microsoft.OperationalInsights: azure-mgmt-loganalytics 14.0 sends 2025-07-01; the Azure CLI 2022-10-01.
LOGS_VERSIONS = ("2020-08-01", "2021-06-01", "2022-10-01", "2023-09-01", "2025-02-01", "2025-07-01")


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
        "microsoft.storage": STORAGE_VERSIONS,
        "microsoft.operationalinsights": LOGS_VERSIONS,
        "microsoft.containerregistry": REGISTRY_VERSIONS,
    }
    return known.get((namespace or "").lower(), RESOURCES_VERSIONS)


def supported(namespace: str | None, resource_type: str | None = None) -> str:
    if resource_type is not None and (namespace or "").lower() == "microsoft.app":
        return ", ".join(app_versions(resource_type))
    return ", ".join(_versions(namespace))


def app_type(path: str) -> str:
    """The Microsoft.App resource type a path (or route pattern) addresses, as the provider names it
    in `resourceTypes`: `jobs` for a job and everything under it, `locations/<kind>` under a
    location. Names ({x} or real) are every other segment after the namespace."""
    _, _, rest = path.partition("/providers/Microsoft.App/")
    if not rest:
        _, _, rest = path.lower().partition("/providers/microsoft.app/")
    kinds = rest.strip("/").split("/")[::2]
    if kinds[:1] == ["locations"] and len(kinds) > 1:
        return f"locations/{kinds[1]}"
    return kinds[0] if kinds and kinds[0] else ""


def app_versions(resource_type: str) -> tuple[str, ...]:
    """The api-versions a Microsoft.App resource type accepts and advertises, oldest first."""
    since = next((v for t, v in APP_TYPE_SINCE.items() if t.lower() == resource_type.lower()), None)
    if since is None:
        return APP_VERSIONS
    return APP_VERSIONS[APP_VERSIONS.index(since) :]


def check_app_type(api_version: str, resource_type: str, location: str) -> None:
    """A version the provider knows but this type does not: ARM's answer for a registered type."""
    accepted = app_versions(resource_type)
    if api_version not in accepted:
        raise ArmError(
            f"No registered resource provider found for location '{location}' and API version "
            f"'{api_version}' for type '{resource_type}'. The supported api-versions are "
            f"'{', '.join(accepted)}'.",
            code="NoRegisteredProviderFound",
        )


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
