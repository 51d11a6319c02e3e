"""Where an Azure Files share lives on the emulator's machine: one folder per (account, share) under
the server's `storages/` directory. A job's volume mount (Podman's `-v`) and the file data plane
(dataplane/files.py) both use it, so what a container writes there, an SDK client lists and
downloads, and two environment storages naming the same share see the same files, as on Azure."""

from __future__ import annotations

from pathlib import Path


def share_key(account: str, share: str) -> str:
    """`{account}-{share}`: unambiguous, since an account name has no hyphen."""
    return f"{account}-{share}".lower()


def share_folder(storages: Path, account: str, share: str) -> Path:
    return storages / share_key(account, share)
