"""Downloading what jobs wrote to an Azure Files share, through the Azure SDK for File Shares.

A fan-out's shards write into their own folder of a share the environment mounts; when the run
ends, each shard's folder comes back to the user's machine. The account key (from listKeys) signs
every request (SharedKey); it is never printed or stored. `endpoint` is the account's
`primaryEndpoints.file` (Azure's `https://{account}.file.core.windows.net/`, or the emulator's
path-style URL), so the same code reads a share on Azure and in `acagpu emulator serve`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from azure.core.exceptions import (
    AzureError,
    DecodeError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.fileshare import LinearRetry, ShareClient

from aca_gpu.azure import recorder
from aca_gpu.errors import BadInput, InfraError
from aca_gpu.models import ShareDownload

T = TypeVar("T")
# The Storage SDK's own default waits 15 s, then 18 s, then 24 s (plus jitter) before it gives up,
# without a word: a share's call is sent again after 1 s, twice at most.
SDK_RETRIES = 2
# A download's transfers are retried here instead (the SDK sends nothing twice), each said: a file
# whose body was cut is fetched again whole, since the SDK cannot resume a cut body on its own.
TRIES = 4
PAUSES_S = (0.5, 1.0, 2.0)
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)
PARTIAL = ".acagpu-partial"  # a file on its way in: renamed to its own name once complete


def default_endpoint(account: str) -> str:
    return f"https://{account}.file.core.windows.net/"


def share_client(
    account: str,
    key: str,
    share: str,
    *,
    endpoint: str | None = None,
    verify: str | bool = True,
    sas: str | None = None,
    retries: int = SDK_RETRIES,
) -> ShareClient:
    """Signed with the account key (SharedKey), or with `sas` (a share or account SAS) instead.
    `retries`: how often the SDK itself sends a call again (short pauses; 0 where the caller
    retries, and says so, itself)."""
    credential: Any = sas.lstrip("?") if sas else {"account_name": account, "account_key": key}
    policy = LinearRetry(backoff=1, retry_total=retries, random_jitter_range=0)
    return ShareClient(
        account_url=(endpoint or default_endpoint(account)).rstrip("/"),
        share_name=share,
        credential=credential,
        connection_verify=verify,
        retry_policy=policy,
        **recorder.storage_options(verify),  # `--record` keeps the share's exchanges too
    )


def _inside(dest: Path, relative: str) -> Path:
    """The local path for a share path, refusing one that would climb out of `dest`."""
    parts = PurePosixPath(relative).parts
    if any(p in ("..", "") or "/" in p or "\\" in p for p in parts):
        raise InfraError(f"the share listed an unsafe name {relative!r}; nothing written for it")
    return dest.joinpath(*parts)


def transient(exc: BaseException) -> bool:
    """A failure that a second try may not meet: a lost connection, a cut body, a 5xx or a 429."""
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, DecodeError)):
        return True
    if isinstance(exc, HttpResponseError):  # a 2xx raised is a body cut short (the SDK's own wrap)
        return exc.status_code in TRANSIENT_STATUS or 200 <= (exc.status_code or 0) < 300
    return False


def refused(exc: BaseException) -> bool:
    """The account refused the key or the SAS: every other file would be refused too."""
    return isinstance(exc, HttpResponseError) and exc.status_code in (401, 403)


def why(exc: BaseException) -> str:
    """A failure in a few words, for the line that says a transfer is tried again or did not arrive."""
    if isinstance(exc, DecodeError):
        return "the answer was cut short"
    if isinstance(exc, ServiceRequestError):
        return "no connection"
    if isinstance(exc, ServiceResponseError):
        return "the connection was lost"
    if isinstance(exc, HttpResponseError):
        if 200 <= (exc.status_code or 0) < 300:
            return "the answer was cut short"
        return f"HTTP {exc.status_code} {getattr(exc, 'error_code', None) or exc.reason or ''}".strip()
    return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__


class _Transfers:
    """Each call tried up to TRIES times when its failure is transient; every retry counted and said."""

    def __init__(self, on_retry: Callable[[str], None] | None) -> None:
        self.on_retry = on_retry
        self.retries = 0

    def call(self, what: str, action: Callable[[], T]) -> T:
        for attempt in range(1, TRIES + 1):
            try:
                return action()
            except AzureError as exc:
                if attempt == TRIES or not transient(exc):
                    raise
                pause = PAUSES_S[min(attempt, len(PAUSES_S)) - 1]
                self.retries += 1
                if self.on_retry is not None:
                    self.on_retry(f"{what}: {why(exc)}; try {attempt + 1} of {TRIES} in {pause:g}s")
                time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover


def _listing(directory: Any) -> list[Any]:
    return list(directory.list_directories_and_files())


def _fetch(client: ShareClient, path: str, local: Path) -> None:
    """`path` into `local`, complete or not at all: the bytes go to a partial name first and are
    renamed once every one arrived, so a cut transfer never leaves a file under its own name."""
    incoming = local.with_name(local.name + PARTIAL)
    try:
        with incoming.open("wb") as handle:
            stream = client.get_file_client(path).download_file()
            got = stream.readinto(handle)
        if got != stream.size:
            raise DecodeError(f"{got} of {stream.size} bytes arrived")
        os.replace(incoming, local)
    finally:
        incoming.unlink(missing_ok=True)


def download_tree(
    account: str,
    key: str,
    share: str,
    prefix: str,
    dest: Path,
    *,
    endpoint: str | None = None,
    verify: str | bool = True,
    sas: str | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> ShareDownload:
    """Every file under `prefix` (a folder of the share; "" for all of it) written under `dest`, keeping
    the folder layout below `prefix`. A `prefix` that does not exist is an empty result (a shard
    that wrote nothing), not an error. A file or folder that did not arrive (after its tries, when
    its failure was transient) is named in `missed` and the rest still come; a refused key or SAS,
    a missing share and a local disk error raise, since no other file would arrive either."""
    if not account or not (key or sas) or not share:
        raise BadInput("download_tree needs an account, its key (or a SAS) and a share")
    client = share_client(account, key, share, endpoint=endpoint, verify=verify, sas=sas, retries=0)
    transfers = _Transfers(on_retry)
    root = prefix.strip("/")
    written: list[Path] = []
    missed: list[tuple[str, str]] = []
    pending = [root]
    with client:
        try:
            while pending:
                folder = pending.pop()
                directory = client.get_directory_client(folder or None)
                try:
                    entries = transfers.call(f"list {folder or '/'}", partial(_listing, directory))
                except ResourceNotFoundError:
                    if folder == root:
                        return ShareDownload()
                    raise
                except AzureError as exc:
                    if refused(exc):
                        raise
                    missed.append((f"{folder}/", why(exc)))
                    continue
                for entry in entries:
                    name = str(getattr(entry, "name", ""))
                    path = f"{folder}/{name}" if folder else name
                    if getattr(entry, "is_directory", False):
                        pending.append(path)
                        continue
                    local = _inside(dest, path[len(root) :].lstrip("/"))
                    local.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        transfers.call(path, partial(_fetch, client, path, local))
                    except AzureError as exc:
                        if refused(exc):
                            raise
                        missed.append((path, why(exc)))
                        continue
                    written.append(local)
        except ResourceNotFoundError as exc:
            raise InfraError(f"share {share} of account {account}: {exc.reason or 'not found'}") from None
        except AzureError as exc:
            raise InfraError(f"downloading from share {share} of account {account} failed: {exc}") from None
    return ShareDownload(tuple(sorted(written)), tuple(missed), transfers.retries)
