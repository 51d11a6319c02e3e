"""ARM plumbing shared by every provider: the error envelope, JSON responses, ids and timestamps."""

from __future__ import annotations

import json
import secrets
import string
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

# Every api-version Microsoft.App knows: the provider's `resourceTypes[].apiVersions` as recorded in
# November 2025 (the Azure CLI extension's test_containerapp_env_environment_mode cassette), plus
# 2026-03-02-preview and 2026-07-01, the newer preview and stable versions of the 2026 spec (2026-07-01
# is azure-mgmt-appcontainers 5.1.0's default; 2026-03-02-preview the newest preview seen, its source
# not recorded: UNCONFIRMED). Each resource type accepts, and lists in `api-supported-versions`, the
# part of it from the version the type first appeared at (versions.app_versions: jobs from
# 2022-11-01-preview).
APP_SUPPORTED_VERSIONS = (
    "2022-03-01, 2022-06-01-preview, 2022-10-01, 2022-11-01-preview, 2023-04-01-preview, 2023-05-01, "
    "2023-05-02-preview, 2023-08-01-preview, 2023-11-02-preview, 2024-02-02-preview, 2024-03-01, "
    "2024-08-02-preview, 2024-10-02-preview, 2025-01-01, 2025-02-02-preview, 2025-07-01, "
    "2025-10-02-preview, 2026-01-01, 2026-03-02-preview, 2026-07-01"
)
# The provider's `defaultApiVersion` for its resource types, as recorded (its newest preview then).
APP_DEFAULT_VERSION = "2025-10-02-preview"


class ArmError(Exception):
    """An error ARM reports as `{"error": {"code", "message"}}` with a given HTTP status."""

    status: int = 400
    code: str = "BadRequest"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}

    def response(self) -> web.Response:
        return json_response(self.envelope(), status=self.status, headers=self.headers)


class NotFoundError(ArmError):
    status = 404
    code = "ResourceNotFound"


def resource_not_found(resource_type: str, name: str, rg: str) -> NotFoundError:
    """ARM's own 404 for a resource of a group (`Microsoft.Storage/storageAccounts`, ...), word for word."""
    return NotFoundError(
        f"The Resource '{resource_type}/{name}' under resource group '{rg}' was not found. "
        "For more details please go to https://aka.ms/ARMResourceNotFoundFix"
    )


class ConflictError(ArmError):
    status = 409
    code = "Conflict"


def json_response(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json; charset=utf-8", **(headers or {})},
    )


def empty_response(status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, headers=headers or {})


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso_z(moment: datetime | None = None) -> str:
    """`2024-04-16T09:42:21Z`, the replica `createdTime` form."""
    return (moment or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_offset(moment: datetime | None = None) -> str:
    """`2024-08-17T10:36:07+00:00`, the execution/revision time form."""
    return (moment or utc_now()).replace(microsecond=0).isoformat()


def iso_ticks(moment: datetime | None = None) -> str:
    """`2024-05-30T07:41:16.5918959`, the operation-status `startTime` form (7 digits, no zone)."""
    m = moment or utc_now()
    return m.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.microsecond:06d}0"


def new_op_id() -> str:
    return str(uuid.uuid4())


def rand_suffix(n: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def read_json(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArmError(
            f"The request content was invalid and could not be deserialized: '{exc.msg}'.",
            code="InvalidRequestContent",
        ) from exc
    if not isinstance(body, dict):
        raise ArmError(
            "The request content was invalid: expected a JSON object.", code="InvalidRequestContent"
        )
    return body


def get_ci(mapping: dict[str, Any], key: str, default: Any = None) -> Any:
    """Case-insensitive key lookup: the Azure CLI sends `"Name"` where the SDK sends `"name"`."""
    for k, v in mapping.items():
        if k.lower() == key.lower():
            return v
    return default
