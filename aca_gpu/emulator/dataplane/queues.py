"""The Storage queue data plane of the emulated accounts: checked here, served by Azurite.

An account's `primaryEndpoints.queue` is `https://127.0.0.1:PORT/_queue/{account}/` (path-style, as
the file endpoint is). A request must be signed as on Azure: SharedKey with one of the account's
keys (what acagpu sends, the key read by listKeys), or a bearer token for Azure Storage's audience
from the identity endpoint (what a job's worker sends, its managed identity's). Once it passes, it
goes on to Azurite, which keeps the queues and answers; Azurite sees the emulator's own storage
token, since it knows one account and checks no signature of ours.

Azurite checks no role assignment; this proxy does, for a bearer token: the identity must hold a
data role granting the message operation's data action at the queue's scope or above
(dataplane/queue_rbac.py), else 403 AuthorizationPermissionMismatch, as Azure Storage answers.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import unquote

import aiohttp
from aiohttp import web

from aca_gpu.emulator.dataplane import files_auth
from aca_gpu.emulator.state import StorageAccount

PREFIX = "/_queue/"
_HOP = {"transfer-encoding", "connection", "content-length", "keep-alive", "server", "date"}


def endpoint_of(base: str, account: str) -> str:
    return f"{base}{PREFIX}{account}/"


def _error(status: int, code: str, message: str) -> web.Response:
    body = (
        '<?xml version="1.0" encoding="utf-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    )
    return web.Response(
        status=status, text=body, content_type="application/xml", headers={"x-ms-error-code": code}
    )


def not_served() -> web.Response:
    """This emulator's own answer (not Azure's) when it runs without Azurite: 501, which the Storage
    SDK does not retry, with the flag that serves the queues."""
    return _error(
        501,
        "NotImplemented",
        "this emulator serves Storage queues only when started with "
        "`acagpu emulator serve --storage azurite`",
    )


class QueueProxy:
    """Authenticates a queue request against the emulated account, then forwards it to Azurite."""

    def __init__(
        self,
        *,
        azurite_endpoint: str,
        ca_bundle: str,
        storage_token: Any,
        storage_caller: Any,
        authorize: Any = None,
        faults: Any = None,
    ) -> None:
        self.azurite = azurite_endpoint.rstrip("/")
        self._ssl = ssl.create_default_context(cafile=ca_bundle)
        self._token = storage_token  # () -> a fresh bearer token for Azurite
        self._caller = storage_caller  # (header) -> object id or None
        # (principal, account, method, rest of the path, query) -> whether its roles allow the call
        self._authorize = authorize
        self._faults = faults  # queue_busy / queue_reset (faults.py)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _refusal(self, req: web.Request, account: StorageAccount, rest: str) -> web.Response | None:
        header = req.headers.get("Authorization", "")
        if not header:
            return _error(401, "NoAuthenticationInformation", "Server failed to authenticate the request.")
        if header.startswith("Bearer "):
            principal = self._caller(header)
            if principal is None:
                return _error(401, "InvalidAuthenticationInfo", "The token is not valid for Azure Storage.")
            if self._authorize is not None and not self._authorize(
                principal, account, req.method, rest, req.query
            ):
                return _error(
                    403,
                    "AuthorizationPermissionMismatch",
                    "This request is not authorized to perform this operation using this permission.",
                )
            return None
        why = files_auth.verify(
            header,
            method=req.method,
            headers=req.headers,
            query=req.query,
            account=account.name,
            keys=account.keys,
            raw_path=req.raw_path.split("?", 1)[0],
        )
        if why is None:
            return None
        return _error(
            403,
            "AuthenticationFailed",
            "Server failed to authenticate the request. Make sure the value of Authorization header is "
            f"formed correctly including the signature. ({why})",
        )

    def _fault(self, kind: str, req: web.Request, account: StorageAccount, rest: str) -> Any:
        if self._faults is None:
            return None
        return self._faults.fire(kind, path=f"{PREFIX}{account.name}/{rest}", method=req.method)

    async def serve(self, req: web.Request, account: StorageAccount, rest: str) -> web.StreamResponse:
        refused = self._refusal(req, account, rest)
        if refused is not None:
            return refused
        busy = self._fault("queue_busy", req, account, rest)
        if busy is not None:
            return _busy(int(busy.param("status", "503")))
        reset = self._fault("queue_reset", req, account, rest)
        if reset is not None and reset.param("when", "before") == "before":
            return _reset(req)
        answer = await self._forward(req, rest)
        return _reset(req) if reset is not None else answer

    async def _forward(self, req: web.Request, rest: str) -> web.Response:
        body = await req.read()
        headers = {k: v for k, v in req.headers.items() if k.lower().startswith("x-ms-")}
        if req.content_type:
            headers["Content-Type"] = req.content_type
        headers["Authorization"] = f"Bearer {self._token()}"
        url = f"{self.azurite}/{rest}"
        async with self._http().request(
            req.method, url, params=list(req.query.items()), data=body or None, headers=headers
        ) as answer:
            data = await answer.read()
            out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
            return web.Response(status=answer.status, body=data, headers=out)

    async def queue_length(self, queue: str) -> int | None:
        """Azure's approximate message count (invisible messages counted), or None when unreadable."""
        url = f"{self.azurite}/{queue}"
        headers = {"Authorization": f"Bearer {self._token()}", "x-ms-version": "2021-02-12"}
        try:
            async with self._http().get(url, params={"comp": "metadata"}, headers=headers) as answer:
                if answer.status != 200:
                    return None
                return int(answer.headers.get("x-ms-approximate-messages-count", "0"))
        except (aiohttp.ClientError, ValueError, OSError):
            return None

    async def queue_metadata(self, queue: str) -> tuple[dict[str, str], int] | None:
        """(metadata, approximate count) of a queue, None when it does not exist (ARM's Queue_Get)."""
        url = f"{self.azurite}/{queue}"
        headers = {"Authorization": f"Bearer {self._token()}", "x-ms-version": "2021-02-12"}
        async with self._http().get(url, params={"comp": "metadata"}, headers=headers) as answer:
            if answer.status == 404:
                return None
            if answer.status != 200:
                raise OSError(f"Azurite answered {answer.status} for queue {queue}'s metadata")
            prefix = "x-ms-meta-"
            found = {k[len(prefix) :]: v for k, v in answer.headers.items() if k.lower().startswith(prefix)}
            return found, int(answer.headers.get("x-ms-approximate-messages-count", "0"))

    async def delete_queue(self, queue: str) -> bool:
        """Delete a queue (ARM's Queue_Delete); False when there was none."""
        headers = {"Authorization": f"Bearer {self._token()}", "x-ms-version": "2021-02-12"}
        async with self._http().delete(f"{self.azurite}/{queue}", headers=headers) as answer:
            if answer.status not in (204, 404):
                raise OSError(f"Azurite answered {answer.status} to deleting queue {queue}")
            return answer.status == 204


def _busy(status: int) -> web.Response:
    """A `queue_busy` fault's answer: Storage's throttling is 503 ServerBusy (500 InternalError; 429
    is this emulator's own, Storage documents none)."""
    if status == 500:
        return _error(
            500, "InternalError", "The server encountered an internal error. Please retry the request."
        )
    if status == 429:
        return _error(429, "TooManyRequests", "Too many requests. Please retry the request.")
    return _error(
        503, "ServerBusy", "The server is currently unable to receive requests. Please retry your request."
    )


def _reset(req: web.Request) -> web.Response:
    """A `queue_reset` fault: the connection dropped without an answer (what is returned is never sent)."""
    if req.transport is not None:
        req.transport.abort()
    return web.Response(status=500)


def split(path: str) -> tuple[str, str] | None:
    """(account, the rest of the path) of a queue data-plane path, or None."""
    if not path.startswith(PREFIX):
        return None
    account, _, rest = path.removeprefix(PREFIX).partition("/")
    return unquote(account), rest
