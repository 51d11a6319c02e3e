"""Shared access signatures for the Azure Files data plane: a service SAS for a share (`sr=s`) or one
file (`sr=f`), or an account SAS naming the File service (`ss` with `f`), checked as the Storage
service does: the signature against the account's keys (Microsoft's string to sign for each form),
the validity window (`st`, `se`), the resource it covers, and the permission the operation needs.

Not served: user delegation SAS (`skoid`...), stored access policies (`si` is signed but names no
policy here), `sip` (every caller is on loopback). UNCONFIRMED where Azure's exact error code for a
case is not documented: an expired or not-yet-valid SAS answers 403 AuthenticationFailed, a missing
permission 403 AuthorizationPermissionMismatch, a resource outside the SAS 403
AuthorizationResourceTypeMismatch.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from multidict import MultiMapping

from aca_gpu.emulator.dataplane.files_auth import sign

SAS_KEYS = frozenset(
    {
        "sv",
        "ss",
        "srt",
        "sp",
        "st",
        "se",
        "sip",
        "spr",
        "sr",
        "si",
        "sig",
        "rscc",
        "rscd",
        "rsce",
        "rscl",
        "rsct",
    }
)


class SasRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _when(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise SasRefused("AuthenticationFailed", f"Signed time {value!r} is not an ISO 8601 time.") from None


def _string_to_sign(query: MultiMapping[str], account: str, share: str, path: str) -> str:
    def v(name: str) -> str:
        return query.get(name, "")

    if "ss" in query:  # account SAS (the File service's form: an empty encryption scope line)
        fields = [account, v("sp"), v("ss"), v("srt"), v("st"), v("se"), v("sip"), v("spr"), v("sv"), "", ""]
        return "\n".join(fields)
    resource = f"/file/{account}/{share}" + (f"/{path}" if v("sr") == "f" else "")
    fields = [v("sp"), v("st"), v("se"), resource, v("si"), v("sip"), v("spr"), v("sv")]
    fields += [v("rscc"), v("rscd"), v("rsce"), v("rscl"), v("rsct")]
    return "\n".join(fields)


def check(
    query: MultiMapping[str],
    *,
    account: str,
    keys: Iterable[str],
    share: str,
    path: str,
    needs: str,
    share_level: bool,
) -> None:
    """Raise SasRefused unless the SAS in `query` allows permission `needs` (r, l, c, w, d) on `path`
    (inside `share`; "" for its root); `share_level`: a share operation, not a directory's or file's."""
    text = _string_to_sign(query, account, share, path)
    if not any(sign(key, text) == query.get("sig", "") for key in keys):
        raise SasRefused(
            "AuthenticationFailed",
            "Server failed to authenticate the request. Make sure the value of Authorization header is "
            "formed correctly including the signature. (the SAS signature matches neither key)",
        )
    now = datetime.now(UTC)
    if "se" not in query or now > _when(query["se"]):
        raise SasRefused("AuthenticationFailed", "Signed expiry time has passed (or is missing).")
    if "st" in query and now < _when(query["st"]):
        raise SasRefused("AuthenticationFailed", "Signed start time is in the future.")
    if query.get("spr", "https") not in ("https", "https,http"):
        raise SasRefused(
            "AuthenticationFailed", f"Signed protocol {query['spr']!r} is not one the service takes."
        )
    if "ss" in query:
        wanted, what = ("c", "shares") if share_level else ("o", "objects")
        if "f" not in query["ss"] or wanted not in query.get("srt", ""):
            raise SasRefused(
                "AuthorizationResourceTypeMismatch",
                f"This account SAS does not cover the File service's {what}.",
            )
    elif query.get("sr") == "f" and (share_level or not path):
        raise SasRefused("AuthorizationResourceTypeMismatch", "This file SAS does not cover the share.")
    elif query.get("sr") not in ("s", "f"):
        raise SasRefused("AuthenticationFailed", f"Signed resource {query.get('sr')!r} is not s or f.")
    allowed = set(query.get("sp", ""))
    if needs not in allowed and not (needs == "c" and "w" in allowed):
        raise SasRefused(
            "AuthorizationPermissionMismatch",
            f"This request is not authorized to perform this operation using this permission ({needs}).",
        )
