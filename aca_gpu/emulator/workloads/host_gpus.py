"""One GPU per replica on a GPU host: which of the host's GPUs each replica of `--workload host` gets.

ACA gives a serverless GPU replica its own GPU (a profile's count of them: one on every
Consumption-GPU type), and inside the container CUDA and `nvidia-smi` see that GPU alone. On a
multi-GPU host every replica would otherwise see all of them, and every shard would run on GPU 0.
So each GPU replica is given the GPUs that fewest replicas hold (lowest index first): its processes
get `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` naming them (by UUID, which CUDA's own
device order cannot mix up), and an `nvidia-smi` first on their PATH that runs the host's with
`-i` (unless the caller names GPUs itself), so it shows those GPUs alone.

Where replicas outnumber the host's GPUs they share, and say so: the emulator's fleet has the
capacity the region's quota allows, which a single host cannot mirror, and holding the extra
replicas would serialise what ACA runs side by side (an `up`'s probe and tester, a fan-out's
shards). The replica's system log gets a `GpuShared` event (the emulator's own, no ACA event),
listed with the other host-mode differences in docs/emulator.md. Also the emulator's own, and
labelled there: `nvidia-smi -i N` keeps the host's index N, where a container would show 0.

The host's GPUs come from `nvidia-smi --query-gpu=index,uuid,name`, so a test fakes them with an
`nvidia-smi` of its own on PATH, as the e2e tests on machines without a driver do.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SHARED_REASON = "GpuShared"


@dataclass(frozen=True)
class HostGpu:
    index: int
    uuid: str
    name: str


def read_host_gpus(exe: str | None = None) -> tuple[HostGpu, ...]:
    """The host's GPUs as nvidia-smi lists them; () without nvidia-smi or with an answer that does
    not parse (then replicas see the host as they find it, as before)."""
    exe = exe or shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,uuid,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[0].isdigit() and parts[1]:
            gpus.append(HostGpu(int(parts[0]), parts[1], parts[2]))
    return tuple(gpus)


@dataclass(frozen=True)
class Seat:
    """The GPUs one replica holds, and whether another replica holds one of them too."""

    gpus: tuple[HostGpu, ...]
    shared_with: int  # how many other replicas hold one of these GPUs (0: its own)

    def env(self) -> dict[str, str]:
        uuids = ",".join(g.uuid for g in self.gpus)
        return {"CUDA_VISIBLE_DEVICES": uuids, "NVIDIA_VISIBLE_DEVICES": uuids}

    def notice(self, total: int) -> str | None:
        if not self.shared_with:
            return None
        which = ", ".join(str(g.index) for g in self.gpus)
        return (
            f"emulator (--workload host): this replica shares GPU {which} with {self.shared_with} other "
            f"replica(s): the host has {total} GPU(s) and more GPU replicas are running; on ACA each "
            "replica has its own"
        )


class GpuSeats:
    """Who holds which of the host's GPUs, by replica name (a replica's containers and its
    restarts keep its seat; it is given back when the replica stops). Thread-safe: containers
    start on worker threads."""

    def __init__(self, gpus: tuple[HostGpu, ...]) -> None:
        self.gpus = gpus
        self._held: dict[str, Seat] = {}
        self._lock = threading.Lock()

    def take(self, replica: str, count: int) -> Seat | None:
        """This replica's seat (the same one when it already has one); None on a host without GPUs."""
        if not self.gpus or count <= 0:
            return None
        with self._lock:
            seat = self._held.get(replica)
            if seat is not None:
                return seat
            load = Counter(g.index for s in self._held.values() for g in s.gpus)
            ranked = sorted(self.gpus, key=lambda g: (load[g.index], g.index))
            chosen = tuple(sorted(ranked[: min(count, len(self.gpus))], key=lambda g: g.index))
            others = sum(1 for s in self._held.values() if set(s.gpus) & set(chosen))
            seat = Seat(chosen, others)
            self._held[replica] = seat
            return seat

    def give_back(self, replica: str) -> None:
        with self._lock:
            self._held.pop(replica, None)

    def holders(self) -> dict[str, tuple[int, ...]]:
        with self._lock:
            return {name: tuple(g.index for g in seat.gpus) for name, seat in self._held.items()}


def smi_wrapper(folder: Path, real: str, seat: Seat) -> Path:
    """An `nvidia-smi` in `folder` that shows this seat's GPUs alone: the host's with `-i` (the
    table, `-q`, `--query-gpu`), `-L` filtered to the seat's lines; unchanged when the caller names
    GPUs itself (`-i`, `--id`) or runs a subcommand (`topo`, `nvlink`, ...: the host's view, a
    difference docs/emulator.md labels)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = ",".join(str(g.index) for g in seat.gpus)
    listed = "|".join(str(g.index) for g in seat.gpus)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        "# this replica's GPUs alone (acagpu emulator, --workload host)\n"
        'h="$0.host"\n'
        'case "$1" in [!-]*) exec "$h" "$@" ;; esac\n'
        'for a in "$@"; do case "$a" in -i|-i*|--id|--id=*) exec "$h" "$@" ;; esac; done\n'
        'for a in "$@"; do case "$a" in -L|--list-gpus)\n'
        f'  "$h" "$@" | grep -E "^GPU ({listed}):"; exit 0 ;; esac; done\n'
        f'exec "$h" -i {ids} "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    host = folder / "nvidia-smi.host"
    if not host.exists():
        host.symlink_to(real)
    return script
