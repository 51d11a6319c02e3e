"""api-version checks, as ARM does them: required on every call, and one the provider knows."""

from __future__ import annotations

from aca_gpu.emulator.arm import APP_SUPPORTED_VERSIONS, ArmError

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


# recorded (November 2025): executions answer `detailedStatus` at 2025-10-02-preview, not at 2025-07-01
DETAILED_STATUS_SINCE = "2025-10-02"


def answers_detailed_status(api_version: str | None) -> bool:
    """Does a job execution read at this Microsoft.App api-version carry `detailedStatus`?"""
    return (api_version or "")[:10] >= DETAILED_STATUS_SINCE


def _versions(namespace: str | None) -> tuple[str, ...]:
    return {"microsoft.app": APP_VERSIONS, "microsoft.authorization": AUTHORIZATION_VERSIONS}.get(
        (namespace or "").lower(), RESOURCES_VERSIONS
    )


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
