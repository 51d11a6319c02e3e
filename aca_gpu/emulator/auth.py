"""Data-plane tokens: 1-hour HS256 JWTs shaped like the ones ACA's getAuthToken returns."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt

TOKEN_LIFETIME_S = 3600
ISSUER = "AzureContainerApps"


class TokenRejected(Exception):
    """The data-plane bearer token is missing, expired, forged or for another resource."""


@dataclass(frozen=True)
class Scope:
    """What a token opens: an app or job (`capp_name`) or a whole environment (`kubeenv_name`)."""

    subscription: str
    resource_group: str
    app: str | None = None
    environment: str | None = None


class TokenMinter:
    def __init__(self, *, audience_host: str) -> None:
        self._secret = secrets.token_bytes(32)
        self.audience = audience_host

    def mint(self, scope: Scope, *, lifetime_s: int = TOKEN_LIFETIME_S) -> tuple[str, str]:
        """Return (token, expires ISO-8601 Z) like the real `properties.token` / `properties.expires`."""
        moment = time.time()
        now = int(moment)
        exp = now + lifetime_s
        claims: dict[str, Any] = {
            "capp_sub": scope.subscription,
            "capp_rg": scope.resource_group,
            "capp_jit_expiry": datetime.fromtimestamp(exp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nbf": now,
            "exp": exp,
            "iat": now,
            "iss": ISSUER,
            "aud": self.audience,
        }
        if scope.environment is not None:
            claims["kubeenv_name"] = scope.environment
        else:
            claims["capp_name"] = scope.app
        token = jwt.encode(claims, self._secret, algorithm="HS256")
        # `expires` keeps the sub-second part (recorded: 2024-04-16T10:42:43.856493Z); `exp` is whole seconds
        expires = datetime.fromtimestamp(moment + lifetime_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return token, expires

    def verify(self, header: str | None) -> dict[str, Any]:
        if not header or not header.startswith("Bearer "):
            raise TokenRejected("missing bearer token")
        try:
            claims: dict[str, Any] = jwt.decode(
                header[len("Bearer ") :],
                self._secret,
                algorithms=["HS256"],
                audience=self.audience,
                issuer=ISSUER,
                options={"require": ["exp", "nbf", "iat"]},
            )
        except jwt.PyJWTError as exc:
            raise TokenRejected(str(exc)) from exc
        return claims


def allows(
    claims: dict[str, Any],
    *,
    subscription: str,
    resource_group: str,
    app: str | None,
    environment: str | None,
) -> bool:
    """An app/job token opens that app's endpoints; an environment token opens everything in it."""
    if (
        claims.get("capp_sub") != subscription
        or str(claims.get("capp_rg", "")).lower() != resource_group.lower()
    ):
        return False
    if "kubeenv_name" in claims:
        return environment is not None and claims["kubeenv_name"] == environment
    return app is not None and claims.get("capp_name") == app
