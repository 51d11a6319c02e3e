"""Who the credential is and which subscription it reaches, for `acagpu check`.

The ARM token's claims are decoded locally (no signature check: it only labels the caller, it
grants nothing here) and only tid/oid/upn/appid leave this module; the token itself never does.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

from aca_gpu.azure.clients import ARM_SCOPE, Clients
from aca_gpu.azure.translate import translate_errors
from aca_gpu.models import IdentityInfo, SubscriptionInfo

SUBSCRIPTIONS_API_VERSION = "2022-12-01"  # Microsoft.Resources subscriptions (the Azure CLI's version)


def _claims(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        doc = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        return None
    return doc if isinstance(doc, dict) else None


def identity(clients: Clients) -> IdentityInfo:
    """The caller as the ARM token names it; raises AuthError when no token can be had."""
    with translate_errors("get a token for", "Azure Resource Manager"):
        token = clients.credential.get_token(ARM_SCOPE).token
    claims = _claims(token)
    if claims is None:
        return IdentityInfo(kind="opaque token (not a JWT)")

    def text(*keys: str) -> str | None:
        return next((str(claims[k]) for k in keys if claims.get(k)), None)

    appid = text("appid", "azp")
    upn = text("upn", "unique_name", "preferred_username", "email")
    kind = "user" if upn and claims.get("idtyp") != "app" else ("application" if appid else "unknown")
    return IdentityInfo(tenant_id=text("tid"), object_id=text("oid"), upn=upn, app_id=appid, kind=kind)


def subscription(clients: Clients) -> SubscriptionInfo:
    from azure.core.rest import HttpRequest

    url = f"/subscriptions/{quote(clients.subscription_id, safe='')}?api-version={SUBSCRIPTIONS_API_VERSION}"
    with translate_errors("read subscription", clients.subscription_id):
        response = clients.resources.send_request(HttpRequest("GET", url))
        response.raise_for_status()
        doc = response.json()
    return SubscriptionInfo(
        id=str(doc.get("subscriptionId") or clients.subscription_id),
        display_name=doc.get("displayName"),
        state=doc.get("state"),
        tenant_id=doc.get("tenantId"),
    )
