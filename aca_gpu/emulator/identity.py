"""Who the caller is: ARM bearer tokens shaped like Entra ID's, and a managed-identity token endpoint.

Standard Azure tools decode the ARM token before using it (the Azure CLI reads `tid` to pick the
tenant after `az login --identity`), so the emulator's static token is a JWT with `tid`, `oid`, `aud`
and `exp`, signed with a per-server key. The token endpoint has the App Service form
(`IDENTITY_ENDPOINT` + `IDENTITY_HEADER`; `GET ?resource=…&api-version=2019-08-01`): the header's
secret is the static token itself, so whoever holds the emulator's credentials can sign in with any
tool that speaks managed identity, and nothing new has to be handed out. A container of a job or app
with a system-assigned identity gets its own secret instead (providers/app/identity.py): the token
minted for it carries that identity's principal id as `oid`, and ARM checks its role assignments.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt
from aiohttp import web

from aca_gpu.emulator.arm import json_response

ARM_AUDIENCES = ("https://management.core.windows.net/", "https://management.azure.com/")
# Azure Storage's audience: a job's worker signs in to the queue with it (dataplane/queues.py)
STORAGE_AUDIENCES = ("https://storage.azure.com/",)
STATIC_LIFETIME_S = 30 * 24 * 3600  # the static token outlives any emulator run
MINTED_LIFETIME_S = 3600
IDENTITY_PATH = "/msi/token"
IDENTITY_API_VERSION = "2019-08-01"


class ArmTokens:
    """The static token (exact match, as before) plus tokens the identity endpoint mints."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self.tenant = str(uuid.uuid4())
        self.object_id = str(uuid.uuid4())
        self.client_id = str(uuid.uuid4())
        self.static = self.mint(ARM_AUDIENCES[0], lifetime_s=STATIC_LIFETIME_S)

    def mint(
        self, audience: str, *, lifetime_s: int = MINTED_LIFETIME_S, object_id: str | None = None
    ) -> str:
        now = int(time.time())
        oid = object_id or self.object_id
        claims: dict[str, Any] = {
            "aud": audience,
            "iss": f"https://sts.windows.net/{self.tenant}/",
            "iat": now,
            "nbf": now,
            "exp": now + lifetime_s,
            "tid": self.tenant,
            "oid": oid,
            "sub": oid,
            "appid": self.client_id if object_id is None else oid,
            "idtyp": "app",
            "ver": "1.0",
        }
        return jwt.encode(claims, self._key, algorithm="HS256")

    def accepts(self, header: str | None) -> bool:
        return self.caller(header) is not None

    def caller(self, header: str | None) -> str | None:
        """The object id a valid ARM bearer token speaks for, or None."""
        if not header or not header.startswith("Bearer "):
            return None
        token = header[len("Bearer ") :]
        if secrets.compare_digest(token, self.static):
            return self.object_id
        try:
            claims = jwt.decode(token, self._key, algorithms=["HS256"], audience=list(ARM_AUDIENCES))
        except jwt.PyJWTError:
            return None
        return str(claims.get("oid") or self.object_id)

    def storage_caller(self, header: str | None) -> str | None:
        """The object id a bearer token minted for Azure Storage speaks for, or None."""
        if not header or not header.startswith("Bearer "):
            return None
        try:
            claims = jwt.decode(
                header[len("Bearer ") :], self._key, algorithms=["HS256"], audience=list(STORAGE_AUDIENCES)
            )
        except jwt.PyJWTError:
            return None
        return str(claims.get("oid") or self.object_id)


def _error(status: int, message: str) -> web.Response:
    return json_response({"statusCode": status, "message": message}, status=status)


def token_endpoint(
    tokens: ArmTokens, req: web.Request, principal_of: Callable[[str], str | None] = lambda _: None
) -> web.Response:
    """App Service managed identity: `X-IDENTITY-HEADER` must carry the secret; `resource` is the audience.

    `principal_of(secret)` names the managed identity a container's secret belongs to, if any."""
    if req.method != "GET":
        return _error(405, "Only GET is supported.")
    header = req.headers.get("X-IDENTITY-HEADER", "")
    principal = principal_of(header) if header else None
    if principal is None and not secrets.compare_digest(header, tokens.static):
        return _error(401, "The X-IDENTITY-HEADER header is missing or wrong.")
    if req.query.get("api-version") != IDENTITY_API_VERSION:
        return _error(400, f"api-version must be {IDENTITY_API_VERSION}.")
    resource = req.query.get("resource", "").strip()
    audience = resource.removesuffix("/.default")
    if audience.rstrip("/") + "/" not in ARM_AUDIENCES + STORAGE_AUDIENCES:
        return _error(400, f"No identity is configured for the resource '{resource}'.")
    audience = audience.rstrip("/") + "/"
    token = tokens.mint(audience, object_id=principal)
    return json_response(
        {
            "access_token": token,
            "expires_on": str(int(time.time()) + MINTED_LIFETIME_S),
            "resource": resource,
            "token_type": "Bearer",
            "client_id": principal or tokens.client_id,
        }
    )
