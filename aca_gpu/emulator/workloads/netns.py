"""A network of its own for each served replica on the simulated workload, as each ACA replica has.

Two replicas whose model servers both listen on port 8000 (two apps on their default port, or one
app scaled out) would collide on this machine's loopback. Where user namespaces are allowed, the
replica's command runs in a network namespace of its own (`unshare --user --net`), with only a
loopback: `netns_relay.py` relays the connections the ingress makes to a Unix socket per port
(a file: every namespace sees it) to that port inside. Where they are not (a kernel or container
that forbids unprivileged user namespaces, or ACAGPU_EMULATOR_NETNS=off), the replica shares this
machine's network and its port, as before, and the emulator's docs say so.

The namespace has no route out: a served process that downloads its weights at start needs the host
workload (which shares this machine's network) or ACAGPU_EMULATOR_NETNS=off.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

SWITCH = "ACAGPU_EMULATOR_NETNS"  # auto (default): a namespace per served replica when allowed; off
RELAY = Path(__file__).with_name("netns_relay.py")
_counter = itertools.count()
_PREFIX: list[list[str] | None] = []  # the `unshare` words that work here, found once


def _first_that_works() -> list[str] | None:
    binary = shutil.which("unshare")
    if binary is None:
        return None
    for words in (
        [binary, "--user", "--map-current-user", "--net"],
        [binary, "--user", "--map-root-user", "--net"],
    ):
        check = [*words, sys.executable, "-I", "-S", str(RELAY), "--check"]
        try:
            done = subprocess.run(check, capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return words
    return None


def prefix() -> list[str] | None:
    """The command words that start a process in a network namespace of its own; None where that
    is not possible here or is switched off."""
    if os.environ.get(SWITCH, "auto").lower() in ("off", "0", "false", "no"):
        return None
    if not _PREFIX:
        _PREFIX.append(_first_that_works())
    return _PREFIX[0]


def isolated(argv: Sequence[str], ports: Iterable[int]) -> tuple[list[str], Path] | None:
    """`argv` wrapped to run in a namespace of its own, relaying `ports`, and the folder whose
    `PORT` files reach them; None when no namespace can be made (the caller runs `argv` as is).
    The folder is short (a Unix socket's path has at most 107 bytes) and the caller removes it."""
    words = prefix()
    wanted = sorted({int(p) for p in ports if p})
    if words is None or not wanted:
        return None
    folder = Path(tempfile.gettempdir()) / f"acagpu-ns-{os.getpid()}-{next(_counter)}"
    folder.mkdir(mode=0o700)
    relay = [sys.executable, "-I", "-S", str(RELAY), str(folder), ",".join(map(str, wanted)), "--"]
    return [*words, *relay, *argv], folder
