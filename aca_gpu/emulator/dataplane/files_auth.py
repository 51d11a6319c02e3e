"""SharedKey for the Azure Files data plane: the signature a request carries, checked against the
account's keys as the Storage service does, so a wrong or stale key fails here as it fails on Azure.

The string to sign is Microsoft's (SharedKey, version 2009-09-19 and later): the verb, eleven
standard headers (Content-Length empty when 0), the `x-ms-*` headers sorted, then the canonical
resource `/{account}{path}` and each query parameter on its own line as `name:value`. On the
emulator's path-style URL (`https://127.0.0.1:PORT/{account}/{share}/...`) the Azure SDK signs the
path with the account segment in it (`/{account}/{account}/{share}/...`, as it does for Azurite),
while a client that follows the docs to the letter signs it without: both are accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping

from multidict import CIMultiDictProxy, MultiMapping

SIGNED_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)


def _standard_headers(headers: Mapping[str, str], *, with_range: bool) -> str:
    values = {k.lower(): v for k, v in headers.items() if v}
    if values.get("content-length") == "0":
        values.pop("content-length")
    if not with_range:  # the Azure SDK leaves Range out (it sends x-ms-range, which is signed below)
        values.pop("range", None)
    return "\n".join(values.get(name, "") for name in SIGNED_HEADERS) + "\n"


def _ms_headers(headers: CIMultiDictProxy[str]) -> str:
    found = sorted((k.lower(), v) for k, v in headers.items() if k.lower().startswith("x-ms-"))
    return "".join(f"{k}:{v}\n" for k, v in found)


def _query(query: MultiMapping[str]) -> str:
    return "".join(f"\n{k.lower()}:{v}" for k, v in sorted(query.items()))


def strings_to_sign(
    method: str,
    headers: CIMultiDictProxy[str],
    query: MultiMapping[str],
    account: str,
    raw_path: str,
) -> Iterable[str]:
    """Every string a well-behaved client may have signed for this request."""
    bare = raw_path.removeprefix(f"/{account}") or "/"
    for path in (raw_path, bare):
        for with_range in (False, True):
            yield (
                f"{method.upper()}\n"
                + _standard_headers(headers, with_range=with_range)
                + _ms_headers(headers)
                + f"/{account}{path}"
                + _query(query)
            )


def sign(key: str, text: str) -> str:
    digest = hmac.new(base64.b64decode(key), text.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def verify(
    authorization: str,
    *,
    method: str,
    headers: CIMultiDictProxy[str],
    query: MultiMapping[str],
    account: str,
    keys: Iterable[str],
    raw_path: str,
) -> str | None:
    """None when `authorization` is a valid SharedKey signature of this request by one of `keys`;
    else why not, in a few words (the service's 403 says only that authentication failed)."""
    scheme, _, rest = authorization.partition(" ")
    if scheme != "SharedKey":
        return f"the scheme is {scheme or 'missing'}, not SharedKey"
    named, _, signature = rest.strip().partition(":")
    if named != account:
        return f"the header names account {named!r}, the request is for {account!r}"
    texts = list(strings_to_sign(method, headers, query, account, raw_path))
    for key in keys:
        if any(hmac.compare_digest(sign(key, text), signature) for text in texts):
            return None
    return "the signature matches neither of the account's keys"
