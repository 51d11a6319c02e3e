"""Downloading what jobs wrote to an Azure Files share, through the Azure SDK for File Shares.

A fan-out's shards write into their own folder of a share the environment mounts; when the run
ends, each shard's folder comes back to the user's machine. The account key (from listKeys) signs
every request (SharedKey); it is never printed or stored. `endpoint` is the account's
`primaryEndpoints.file` (Azure's `https://{account}.file.core.windows.net/`, or the emulator's
path-style URL), so the same code reads a share on Azure and in `acagpu emulator serve`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.fileshare import ShareClient

from aca_gpu.azure import recorder
from aca_gpu.errors import BadInput, InfraError


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
) -> ShareClient:
    """Signed with the account key (SharedKey), or with `sas` (a share or account SAS) instead."""
    credential: Any = sas.lstrip("?") if sas else {"account_name": account, "account_key": key}
    return ShareClient(
        account_url=(endpoint or default_endpoint(account)).rstrip("/"),
        share_name=share,
        credential=credential,
        connection_verify=verify,
        **recorder.storage_options(verify),  # `--record` keeps the share's exchanges too
    )


def _inside(dest: Path, relative: str) -> Path:
    """The local path for a share path, refusing one that would climb out of `dest`."""
    parts = PurePosixPath(relative).parts
    if any(p in ("..", "") or "/" in p or "\\" in p for p in parts):
        raise InfraError(f"the share listed an unsafe name {relative!r}; nothing written for it")
    return dest.joinpath(*parts)


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
) -> list[Path]:
    """Every file under `prefix` (a folder of the share; "" for all of it) written under `dest`, keeping
    the folder layout below `prefix`; the paths written, sorted. A `prefix` that does not exist is an
    empty result (a shard that wrote nothing), not an error."""
    if not account or not (key or sas) or not share:
        raise BadInput("download_tree needs an account, its key (or a SAS) and a share")
    client = share_client(account, key, share, endpoint=endpoint, verify=verify, sas=sas)
    root = prefix.strip("/")
    written: list[Path] = []
    pending = [root]
    with client:
        try:
            while pending:
                folder = pending.pop()
                directory = client.get_directory_client(folder or None)
                try:
                    entries = list(directory.list_directories_and_files())
                except ResourceNotFoundError:
                    if folder == root:
                        return []
                    raise
                for entry in entries:
                    name = str(getattr(entry, "name", ""))
                    path = f"{folder}/{name}" if folder else name
                    if getattr(entry, "is_directory", False):
                        pending.append(path)
                        continue
                    local = _inside(dest, path[len(root) :].lstrip("/"))
                    local.parent.mkdir(parents=True, exist_ok=True)
                    with local.open("wb") as handle:
                        client.get_file_client(path).download_file().readinto(handle)
                    written.append(local)
        except ResourceNotFoundError as exc:
            raise InfraError(f"share {share} of account {account}: {exc.reason or 'not found'}") from None
        except AzureError as exc:
            raise InfraError(f"downloading from share {share} of account {account} failed: {exc}") from None
    return sorted(written)
