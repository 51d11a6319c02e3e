"""The time model: realistic ACA durations (seconds, as observed on Azure) scaled by `time_scale`.

Sources: the recordings (env create ~80 s of polls, env delete ~9 min of 202s) and the reference's
notes on replica start (image pull dominates: tens of seconds, more for CUDA images).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

DURATIONS: dict[str, float] = {
    "provider_register": 45.0,  # Microsoft.App Registering -> Registered
    "env_create": 80.0,  # PUT managedEnvironments: Waiting -> Succeeded
    "env_delete": 540.0,  # DELETE managedEnvironments: ~9 min of 202 polls
    "env_update": 60.0,  # a non-GPU workload profile added to an existing environment
    "env_update_gpu": 490.0,  # adding a GPU profile to an existing environment (operators: 490 s)
    "app_provision": 18.0,  # containerApps PUT: InProgress -> Succeeded (operators: app PUT 18 s)
    # A GPU app's create, typical; 710 s (T4) is the slowest seen, reached with the slow_create fault.
    "app_provision_gpu": 60.0,
    "job_provision": 8.0,  # jobs PUT: InProgress -> Succeeded
    "app_delete": 20.0,
    "job_delete": 10.0,
    "rg_delete_extra": 15.0,  # after the contained environments are gone
    "assign_replica": 4.0,  # AssigningReplica: scheduling onto a GPU node
    "container_create": 2.0,  # ImagePulled -> ContainerStarted
    "restart_backoff": 10.0,  # between failed container starts
    "scale_in_cooldown": 300.0,  # default Scale.cooldownPeriod
    "replica_linger": 5.0,  # a finished job replica stays listed (and its log readable) until cleaned up
    # a console line reaches the environment's Log Analytics table (UNCONFIRMED: Microsoft documents
    # a typical ingestion latency of 20 s to 3 min; 60 s sits inside it)
    "log_ingestion": 60.0,
}
# "operators" above: third-party operator notes of Sep 2026, not public (UNCONFIRMED).
# Late-2026 measurements by others (newer than the recordings where they differ; no public link
# except microsoft/azure-container-apps#1763 for the 2.94 GB pull: UNCONFIRMED): a GPU workload profile
# takes ~490 s whether it is added later or comes with the environment's create; a T4 app create
# has a tail up to 710 s (one in TAIL_EVERY here, chosen by name so runs are repeatable); pulls take
# the image's size over the registry's bandwidth (2.94 GB in 20 s from a same-region registry, ~7 GB
# in ~5 min from a remote one). Whether an image is cached or streamed is pulls.PullModel's call.
AZURE_2026: dict[str, float] = {
    "env_create_gpu": 490.0,
    "app_provision_gpu_tail": 710.0,
    "pull_same_region_mb_s": 147.0,
    "pull_remote_mb_s": 23.0,
    "pull_overhead": 2.0,  # manifest and layer negotiation
    "pull_cached": 1.0,  # an image already present on the node (only with the `cache` model parameter)
}
DURATION_SETS = ("recorded", "aca-2026")
TAIL_EVERY = 8
# Compressed sizes (GB) by what an image name says; a registry's manifest would say exactly. The
# first match wins: PyTorch's images (the tester's `pytorch/pytorch:…-cudnn9-runtime`, ≈ 3.3 GB by
# the figure) before cuDNN's own `nvidia/cuda:…-cudnn-…`.
IMAGE_SIZES_GB: tuple[tuple[tuple[str, ...], float], ...] = (
    (("devel",), 4.6),
    (("pytorch", "tensorflow", "vllm", "nim"), 3.3),
    (("cudnn",), 3.6),
    (("runtime",), 1.6),
    (("-base", "base-"), 0.12),
    (("cuda",), 1.6),
)
OTHER_IMAGE_GB = 0.3

# Wall-clock floor for the linger: at test time scales a 5 s linger would be a few ms, shorter than a
# client's own polling interval, and no client on Azure could ever read a job's last lines that fast.
LINGER_FLOOR_S = 0.5
# Wall-clock floor for the tester's stay after its result line: on Azure its 15 s outlast a client
# polling every 5 s for the execution's replica; scaled to a few hundred ms they would not, and the
# emulator would lose results that Azure keeps readable.
GRACE_FLOOR_S = 3.0


def grace_wall_seconds(grace: float, scale: float) -> float:
    """The tester's grace on the scaled clock, never below GRACE_FLOOR_S when it has one at all."""
    return max(grace * scale, GRACE_FLOOR_S) if grace > 0 else 0.0


def image_pull_seconds(image: str) -> float:
    """30-90 s depending on the image; CUDA/PyTorch images sit at the slow end (they are GBs)."""
    lowered = image.lower()
    if any(word in lowered for word in ("pytorch", "tensorflow", "nvidia/cuda", "cuda", "nim", "vllm")):
        low, high = 60.0, 90.0
    else:
        low, high = 30.0, 50.0
    # Stable per image: the same image always pulls in the same time, so tests are repeatable.
    frac = int(hashlib.sha256(image.encode()).hexdigest()[:4], 16) / 0xFFFF
    return low + (high - low) * frac


def image_size_gb(image: str) -> float:
    lowered = image.lower()
    for words, size in IMAGE_SIZES_GB:
        if any(word in lowered for word in words):
            return size
    return OTHER_IMAGE_GB


def has_tail(name: str) -> bool:
    """One create in TAIL_EVERY takes the slow tail (stable per name, so runs are repeatable)."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) % TAIL_EVERY == 0


@dataclass
class Clock:
    """Monotonic scheduling; `after(kind)` is the monotonic time at which a `kind` step completes.

    `durations` picks the set: `recorded` (the recordings and operators' 2025-2026 figures) or
    `aca-2026` (newer late-2026 figures: GPU profiles, app-create tails, size-based pulls; caching
    and streaming: pulls.py).
    """

    scale: float
    durations: str = "recorded"
    origin_mono: float = field(default_factory=time.monotonic)
    origin_utc: datetime = field(default_factory=lambda: datetime.now(UTC))
    # while held (held()): the instant emulated time stands at; `lag`: the wall seconds spent held,
    # taken out of the clock so that it goes on from where it stood
    held_at: float | None = field(default=None, repr=False)
    lag: float = field(default=0.0, repr=False)

    def emulated_utc(self) -> datetime:
        """The emulated wall clock: it started at the server's start and runs 1/scale times faster
        (what a schedule trigger fires on, so `*/15 * * * *` comes round every 18 s at scale 0.02)."""
        return self.origin_utc + timedelta(seconds=self.emulated(self.now() - self.origin_mono))

    def now(self) -> float:
        held = self.held_at
        return held if held is not None else time.monotonic() - self.lag

    @contextmanager
    def held(self) -> Iterator[Clock]:
        """Emulated time stands still inside (advance() moves it on by a given step), then goes on
        from where it stood. A state that lasts a few emulated seconds lasts a few milliseconds at a
        test's time scale: a test that must read it holds the clock rather than racing it, since a
        loaded machine can take longer than that to answer one request."""
        if self.held_at is not None:
            raise RuntimeError("the clock is already held")
        self.held_at = self.now()
        try:
            yield self
        finally:
            self.lag = time.monotonic() - self.held_at
            self.held_at = None

    def advance(self, seconds: float) -> None:
        """Move a held clock on by `seconds` emulated seconds (what comes due then, the ticker does)."""
        if self.held_at is None:
            raise RuntimeError("advance() needs a held clock")
        self.held_at += seconds * self.scale

    def scaled(self, seconds: float) -> float:
        return seconds * self.scale

    def after(self, kind: str, factor: float = 1.0) -> float:
        return self.now() + DURATIONS[kind] * factor * self.scale

    @property
    def azure_2026(self) -> bool:
        return self.durations == "aca-2026"

    def after_seconds(self, seconds: float) -> float:
        return self.now() + seconds * self.scale

    def emulated(self, wall_seconds: float) -> float:
        """Wall seconds -> the emulated (Azure) seconds they stand for."""
        return wall_seconds / self.scale if self.scale > 0 else wall_seconds
