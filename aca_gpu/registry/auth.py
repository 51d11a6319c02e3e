"""Registry auth: parse the `WWW-Authenticate` challenge and fetch bearer tokens, one per scope.

Registries answer an unauthenticated request with 401 and a challenge such as
`Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:x:pull"`;
the client asks the realm for a token (anonymously, or with basic credentials) and retries.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import requests

from aca_gpu.errors import AuthError, CloudError, InfraError

# key="quoted value" or key=token, separated by commas
_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')

# A token lives this long when the token server does not say (the distribution spec's default).
DEFAULT_TOKEN_SECONDS = 60


@dataclass(frozen=True)
class Challenge:
    scheme: str  # "bearer" or "basic", lower-cased
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")


def parse_challenge(header: str) -> Challenge:
    """Parse one `WWW-Authenticate` value; unknown parameters are kept, quotes and escapes removed."""
    header = header.strip()
    if not header:
        raise ValueError("empty WWW-Authenticate header")
    scheme, _, rest = header.partition(" ")
    params = {
        match.group(1).lower(): (
            match.group(2).replace('\\"', '"') if match.group(2) is not None else match.group(3)
        )
        for match in _PARAM.finditer(rest)
    }
    return Challenge(scheme.lower(), params)


@dataclass
class _Token:
    value: str
    expires_at: float


def unreachable(what: str, exc: requests.RequestException) -> InfraError:
    """One sentence for a request that got no answer (exit 7): what failed, never the library's repr."""
    text = repr(exc)
    if "NameResolution" in text or "Name or service not known" in text or "getaddrinfo" in text:
        why = "its name does not resolve (no network, or a DNS or proxy setting)"
    elif isinstance(exc, requests.exceptions.SSLError):
        why = "the TLS handshake failed (a proxy that intercepts TLS needs REQUESTS_CA_BUNDLE)"
    elif isinstance(exc, requests.Timeout):
        why = "no answer in time"
    elif isinstance(exc, requests.ConnectionError):
        why = "the connection was refused or reset (no network, or a firewall)"
    else:
        why = type(exc).__name__
    return InfraError(f"cannot reach {what}: {why}", code="RegistryUnreachable")


class TokenCache:
    """Bearer tokens per (realm, service, scope), refreshed shortly before they expire."""

    def __init__(
        self,
        session: requests.Session,
        *,
        username: str | None = None,
        password: str | None = None,
        verify: bool | str = True,
        timeout: float = 30.0,
    ) -> None:
        self._session = session
        self._auth: tuple[str, str] | None = (
            (username, password) if username and password is not None else None
        )
        self._verify = verify
        self._timeout = timeout
        self._tokens: dict[tuple[str, str, str], _Token] = {}

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        return self._auth

    def token(self, challenge: Challenge, scope: str) -> str:
        realm = challenge.realm
        if not realm:
            raise AuthError("registry sent a Bearer challenge without a realm")
        service = challenge.params.get("service", "")
        key = (realm, service, scope)
        cached = self._tokens.get(key)
        if cached and cached.expires_at > time.monotonic():
            return cached.value
        params = {"scope": scope}
        if service:
            params["service"] = service
        try:
            resp = self._session.get(
                realm, params=params, auth=self._auth, verify=self._verify, timeout=self._timeout
            )
        except requests.RequestException as exc:
            raise unreachable(f"the registry's token service {realm}", exc) from exc
        if resp.status_code in (401, 403):
            raise AuthError(
                f"token service {realm} refused {scope} (HTTP {resp.status_code})",
                hint="check the registry credentials, or whether the repository exists and is public",
            )
        if resp.status_code != 200:
            raise CloudError(f"token service {realm} answered HTTP {resp.status_code} for {scope}")
        try:
            body = resp.json()
            value = body.get("token") or body.get("access_token")
            lifetime = int(body.get("expires_in") or DEFAULT_TOKEN_SECONDS)
        except (ValueError, AttributeError, TypeError) as exc:
            raise CloudError(f"token service {realm} sent an unreadable answer") from exc
        if not isinstance(value, str) or not value:
            raise CloudError(f"token service {realm} sent no token for {scope}")
        # refresh a little early so a long pagination never sends an expired token
        self._tokens[key] = _Token(value, time.monotonic() + max(lifetime - 10, 1))
        return value
