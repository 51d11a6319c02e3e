"""The Azure Files REST subset a client needs to fetch what jobs wrote to a share, path-style on the
emulator's HTTPS server: `https://127.0.0.1:PORT/{account}/{share}/{dir}/{file}` (the form the Azure
SDK takes for a loopback host, as it does for Azurite, which has no File service of its own).

A share is the same host folder a job's volume mount uses (share_folders.py), so what a container
wrote is what a client lists and downloads. Served: share properties; create, get properties, list
(with `prefix`, `maxresults` and `marker`/`NextMarker` continuation) and delete of directories; create,
write a range (`x-ms-write: update`), get properties, download (whole or `x-ms-range`/`Range`) and
delete of files. Requests are authenticated with SharedKey against the account's keys
(files_auth.py) or carry a service or account SAS (files_sas.py). Errors are the service's XML
`<Error><Code>` with `x-ms-error-code`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import uuid
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

from aiohttp import web

from aca_gpu.emulator.dataplane import files_auth, files_sas
from aca_gpu.emulator.share_folders import share_folder
from aca_gpu.emulator.state import StorageAccount

if TYPE_CHECKING:
    from aca_gpu.emulator.context import Ctx

VERSION = "2025-11-05"  # the x-ms-version answered when the request names none
MAX_RESULTS = 5000  # the service's page size when `maxresults` is not given
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class FileError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def find_account(ctx: Ctx, name: str) -> StorageAccount | None:
    """The account of that name in any emulated subscription (account names are global)."""
    for sub in (ctx.fleet or {ctx.subscription: ctx}).values():
        for account in sub.state.storage_accounts.values():
            if account.name == name:
                return account
    return None


def _headers(req: web.Request, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "x-ms-request-id": str(uuid.uuid4()),
        "x-ms-version": req.headers.get("x-ms-version", VERSION),
        "Date": formatdate(usegmt=True),
        **(extra or {}),
    }


def _error(req: web.Request, exc: FileError) -> web.Response:
    headers = _headers(req, {"x-ms-error-code": exc.code})
    if req.method == "HEAD":
        return web.Response(status=exc.status, headers=headers)
    body = (
        '<?xml version="1.0" encoding="utf-8"?><Error>'
        f"<Code>{exc.code}</Code><Message>{escape(exc.message)}\nRequestId:{headers['x-ms-request-id']}\n"
        f"Time:{datetime.now(UTC):%Y-%m-%dT%H:%M:%S.%fZ}</Message></Error>"
    )
    return web.Response(
        status=exc.status, body=body.encode(), headers=headers, content_type="application/xml"
    )


def _file_time(seconds: float) -> str:
    """`2026-11-27T06:59:00.1234567Z`: the 7-digit form the service uses for SMB times."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}0Z"


def _etag(stat: os.stat_result) -> str:
    return f'"0x{stat.st_mtime_ns:X}{stat.st_size:X}"'


def _file_id(path: Path) -> str:
    return str(int(hashlib.sha256(str(path).encode()).hexdigest()[:15], 16))


def _properties(path: Path, stat: os.stat_result, *, directory: bool) -> dict[str, str]:
    times = _file_time(stat.st_mtime)
    found = {
        "ETag": _etag(stat),
        "Last-Modified": formatdate(stat.st_mtime, usegmt=True),
        "x-ms-server-encrypted": "true",
        "x-ms-file-attributes": "Directory" if directory else "Archive",
        "x-ms-file-creation-time": times,
        "x-ms-file-last-write-time": times,
        "x-ms-file-change-time": times,
        "x-ms-file-permission-key": "4066528134148476695*1",
        "x-ms-file-id": _file_id(path),
        "x-ms-file-parent-id": _file_id(path.parent),
    }
    if not directory:
        found.update({"x-ms-type": "File", "Content-Type": "application/octet-stream"})
    return found


class _Target:
    """The share folder and the path inside it that a request names (never outside the share)."""

    def __init__(self, root: Path, segments: list[str]) -> None:
        if any(s in ("", ".", "..") for s in segments):
            raise FileError(
                400, "InvalidResourceName", "The specifed resource name contains invalid characters."
            )
        self.root = root
        self.segments = segments
        self.path = root.joinpath(*segments) if segments else root

    @property
    def name(self) -> str:
        return "/".join(self.segments)


_NEEDS = {  # (method, restype, comp) -> the SAS permission the operation needs
    ("GET", "share", None): "r",
    ("HEAD", "share", None): "r",
    ("GET", "directory", "list"): "l",
    ("GET", "directory", None): "r",
    ("HEAD", "directory", None): "r",
    ("PUT", "directory", None): "c",
    ("DELETE", "directory", None): "d",
    ("GET", None, None): "r",
    ("HEAD", None, None): "r",
    ("PUT", None, None): "c",
    ("PUT", None, "range"): "w",
    ("DELETE", None, None): "d",
}


def _authenticate_sas(req: web.Request, account: StorageAccount, parts: list[str]) -> None:
    share = parts[1] if len(parts) > 1 else ""
    restype, comp = req.query.get("restype"), req.query.get("comp")
    needs = _NEEDS.get((req.method, restype, comp), "")
    if not needs:
        raise FileError(403, "AuthorizationPermissionMismatch", "No SAS permission covers this operation.")
    try:
        files_sas.check(
            req.query,
            account=account.name,
            keys=account.keys,
            share=share,
            path="/".join(p for p in parts[2:] if p),
            needs=needs,
            share_level=restype == "share",
        )
    except files_sas.SasRefused as exc:
        raise FileError(403, exc.code, exc.message) from None


def _authenticate(req: web.Request, account: StorageAccount, parts: list[str]) -> None:
    if "sig" in req.query:
        _authenticate_sas(req, account, parts)
        return
    header = req.headers.get("Authorization")
    if not header:
        raise FileError(401, "NoAuthenticationInformation", "Server failed to authenticate the request.")
    why = files_auth.verify(
        header,
        method=req.method,
        headers=req.headers,
        query=req.query,
        account=account.name,
        keys=account.keys,
        raw_path=req.raw_path.split("?", 1)[0],
    )
    if why is not None:
        raise FileError(
            403,
            "AuthenticationFailed",
            "Server failed to authenticate the request. Make sure the value of Authorization header is "
            f"formed correctly including the signature. ({why})",
        )


async def serve(ctx: Ctx, req: web.Request, storages: Path) -> web.StreamResponse | None:
    """The answer to a file-service request, or None when the path names no storage account."""
    parts = [unquote(p) for p in req.rel_url.raw_path.split("?", 1)[0].lstrip("/").split("/")]
    account = find_account(ctx, parts[0]) if parts and parts[0] else None
    if account is None:
        return None
    try:
        _authenticate(req, account, parts)
        if len(parts) < 2 or not parts[1]:
            raise FileError(
                400, "InvalidUri", "The requested URI does not represent any resource on the server."
            )
        share = parts[1]
        if share not in account.shares:
            raise FileError(404, "ShareNotFound", "The specified share does not exist.")
        root = share_folder(storages, account.name, share)
        root.mkdir(parents=True, exist_ok=True)
        target = _Target(root, [p for p in parts[2:] if p] if any(parts[2:]) else [])
        return await _route(req, target, share)
    except FileError as exc:
        return _error(req, exc)


async def _route(req: web.Request, target: _Target, share: str) -> web.StreamResponse:
    restype, comp, method = req.query.get("restype"), req.query.get("comp"), req.method
    if restype == "share" and not target.segments and method in ("GET", "HEAD") and comp is None:
        stat = target.root.stat()
        return web.Response(
            status=200, headers=_headers(req, {"ETag": _etag(stat), "x-ms-share-quota": "5120"})
        )
    if restype == "directory":
        if comp == "list" and method == "GET":
            return _list(req, target, share)
        if method in ("GET", "HEAD") and comp is None:
            stat = _stat(target, directory=True)
            return web.Response(
                status=200, headers=_headers(req, _properties(target.path, stat, directory=True))
            )
        if method == "PUT" and comp is None:
            return _create_directory(req, target)
        if method == "DELETE":
            return _delete_directory(req, target)
    if restype is None and target.segments:
        if method == "GET" and comp is None:  # file reads and writes off the event loop: they can be big
            return await asyncio.to_thread(_download, req, target)
        if method == "HEAD" and comp is None:
            stat = _stat(target, directory=False)
            props = _properties(target.path, stat, directory=False)
            return web.Response(
                status=200, headers=_headers(req, {**props, "Content-Length": str(stat.st_size)})
            )
        if method == "PUT" and comp is None:
            return _create_file(req, target)
        if method == "PUT" and comp == "range":
            return await _put_range(req, target)
        if method == "DELETE" and comp is None:
            return _delete_file(req, target)
    named = sorted(k for k in req.query if k not in files_sas.SAS_KEYS)  # never a SAS's values
    raise FileError(400, "UnsupportedHttpVerb", f"The emulator does not serve {method} with query {named}.")


def _stat(target: _Target, *, directory: bool) -> os.stat_result:
    path = target.path
    if not path.exists() or path.is_dir() != directory:
        parent_ok = path.parent.is_dir()
        if not parent_ok:
            raise FileError(404, "ParentNotFound", "The specified parent path does not exist.")
        raise FileError(404, "ResourceNotFound", "The specified resource does not exist.")
    return path.stat()


def _list(req: web.Request, target: _Target, share: str) -> web.Response:
    _stat(target, directory=True) if target.segments else None
    prefix = req.query.get("prefix", "")
    marker = req.query.get("marker", "")
    try:
        size = max(1, min(MAX_RESULTS, int(req.query.get("maxresults", MAX_RESULTS))))
    except ValueError:
        raise FileError(400, "InvalidQueryParameterValue", "maxresults is not a number.") from None
    names = sorted(e.name for e in target.path.iterdir() if e.name.startswith(prefix))
    names = [n for n in names if n >= marker] if marker else names
    page, rest = names[:size], names[size:]
    entries = []
    for name in page:
        entry = target.path / name
        stat = entry.stat()
        when = _file_time(stat.st_mtime)
        props = (
            f"<CreationTime>{when}</CreationTime><LastWriteTime>{when}</LastWriteTime>"
            f"<Etag>{escape(_etag(stat))}</Etag>"
        )
        ident = f"<FileId>{_file_id(entry)}</FileId><Name>{escape(name)}</Name>"
        if entry.is_dir():
            entries.append(
                f"<Directory>{ident}<Properties>{props}</Properties><Attributes>Directory</Attributes></Directory>"
            )
        else:
            entries.append(
                f"<File>{ident}<Properties><Content-Length>{stat.st_size}</Content-Length>{props}</Properties>"
                "<Attributes>Archive</Attributes></File>"
            )
    endpoint = f"{req.scheme}://{req.host}/{quote(req.rel_url.raw_path.lstrip('/').split('/', 1)[0])}/"
    body = (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<EnumerationResults ServiceEndpoint="{escape(endpoint)}" ShareName="{escape(share)}" '
        f'DirectoryPath="{escape(target.name)}">'
        + (f"<Prefix>{escape(prefix)}</Prefix>" if prefix else "")
        + (f"<Marker>{escape(marker)}</Marker>" if marker else "")
        + (f"<MaxResults>{req.query['maxresults']}</MaxResults>" if "maxresults" in req.query else "")
        + f"<DirectoryId>{_file_id(target.path)}</DirectoryId>"
        + "<Entries>"
        + "".join(entries)
        + "</Entries>"
        + (f"<NextMarker>{escape(rest[0])}</NextMarker>" if rest else "<NextMarker />")
        + "</EnumerationResults>"
    )
    return web.Response(status=200, body=body.encode(), headers=_headers(req), content_type="application/xml")


def _create_directory(req: web.Request, target: _Target) -> web.Response:
    if not target.path.parent.is_dir():
        raise FileError(404, "ParentNotFound", "The specified parent path does not exist.")
    if target.path.exists():
        raise FileError(409, "ResourceAlreadyExists", "The specified resource already exists.")
    target.path.mkdir()
    stat = target.path.stat()
    return web.Response(status=201, headers=_headers(req, _properties(target.path, stat, directory=True)))


def _delete_directory(req: web.Request, target: _Target) -> web.Response:
    if not target.segments:
        raise FileError(400, "InvalidUri", "The share's root directory cannot be deleted.")
    _stat(target, directory=True)
    if any(target.path.iterdir()):
        raise FileError(409, "DirectoryNotEmpty", "The specified directory is not empty.")
    target.path.rmdir()
    return web.Response(status=202, headers=_headers(req))


def _range_of(req: web.Request, size: int) -> tuple[int, int] | None:
    raw = req.headers.get("x-ms-range") or req.headers.get("Range")
    if not raw:
        return None
    m = _RANGE.match(raw.strip())
    if not m:
        raise FileError(400, "InvalidHeaderValue", f"The range {raw!r} is not of the form bytes=START-END.")
    start = int(m.group(1))
    end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
    if start >= size:
        raise FileError(
            416, "InvalidRange", "The range specified is invalid for the current size of the resource."
        )
    return start, end


def _download(req: web.Request, target: _Target) -> web.Response:
    stat = _stat(target, directory=False)
    props = _properties(target.path, stat, directory=False)
    span = _range_of(req, stat.st_size)
    with target.path.open("rb") as handle:
        if span is None:
            data = handle.read()
            return web.Response(status=200, body=data, headers=_headers(req, props))
        start, end = span
        handle.seek(start)
        data = handle.read(end - start + 1)
    props["Content-Range"] = f"bytes {start}-{end}/{stat.st_size}"
    return web.Response(status=206, body=data, headers=_headers(req, props))


def _create_file(req: web.Request, target: _Target) -> web.Response:
    """Create (or replace) a file of `x-ms-content-length` zero bytes; `put range` fills it."""
    if not target.path.parent.is_dir():
        raise FileError(404, "ParentNotFound", "The specified parent path does not exist.")
    if target.path.is_dir():
        raise FileError(409, "ResourceTypeMismatch", "The specified resource type does not match.")
    try:
        length = int(req.headers.get("x-ms-content-length", ""))
    except ValueError:
        raise FileError(400, "MissingRequiredHeader", "x-ms-content-length is required.") from None
    with target.path.open("wb") as handle:
        handle.truncate(length)
    stat = target.path.stat()
    return web.Response(status=201, headers=_headers(req, _properties(target.path, stat, directory=False)))


async def _put_range(req: web.Request, target: _Target) -> web.Response:
    """`x-ms-write: update` writes the body at `x-ms-range`; `clear` zeroes that range."""
    stat = _stat(target, directory=False)
    if req.headers.get("x-ms-write", "update") != "update":
        span = _range_of(req, stat.st_size)
        if span is not None:
            with target.path.open("r+b") as handle:
                handle.seek(span[0])
                handle.write(b"\0" * (span[1] - span[0] + 1))
        return web.Response(status=201, headers=_headers(req, _written(target.path)))
    span = _range_of(req, stat.st_size)
    if span is None:
        raise FileError(400, "MissingRequiredHeader", "x-ms-range is required.")
    data = await req.read()
    if len(data) != span[1] - span[0] + 1:
        raise FileError(400, "InvalidHeaderValue", "The body's length differs from the range.")
    await asyncio.to_thread(_write_at, target.path, span[0], data)
    return web.Response(status=201, headers=_headers(req, _written(target.path)))


def _write_at(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def _written(path: Path) -> dict[str, str]:
    """What a range write answers: the file's new ETag and time."""
    stat = path.stat()
    return {
        "ETag": _etag(stat),
        "Last-Modified": formatdate(stat.st_mtime, usegmt=True),
        "x-ms-request-server-encrypted": "true",
    }


def _delete_file(req: web.Request, target: _Target) -> web.Response:
    _stat(target, directory=False)
    target.path.unlink()
    return web.Response(status=202, headers=_headers(req))
