"""Token claims name the caller; the token itself never leaves the azure layer."""

from __future__ import annotations

import base64
import json

from aca_gpu.azure.account import identity
from aca_gpu.azure.clients import Clients, StaticTokenCredential
from aca_gpu.config import Settings


def _jwt(claims: dict[str, str]) -> str:
    def part(doc: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def _who(token: str) -> dict[str, object]:
    clients = Clients(Settings(), "sub", credential=StaticTokenCredential(token))
    return identity(clients).as_dict()


def test_user_and_application_tokens() -> None:
    user = _jwt({"tid": "t1", "oid": "o1", "upn": "ada@example.com", "appid": "04b07795"})
    who = _who(user)
    assert who == {
        "kind": "user",
        "tenant_id": "t1",
        "object_id": "o1",
        "upn": "ada@example.com",
        "app_id": "04b07795",
    }
    assert user not in json.dumps(who)
    app = _who(_jwt({"tid": "t2", "oid": "o2", "azp": "app-2", "idtyp": "app"}))
    assert (app["kind"], app["app_id"], app["upn"]) == ("application", "app-2", None)


def test_opaque_token() -> None:
    assert _who("not-a-jwt")["kind"] == "opaque token (not a JWT)"
    assert _who("a.!!!.c")["tenant_id"] is None
