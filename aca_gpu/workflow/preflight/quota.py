"""GPU quota from the subscription's usages by location, read before anything is created.

The usage names ACA reports for GPU quota are not documented (UNCONFIRMED): the known patterns are
the environment-scope "Managed Environment Consumption T4/NCA100 Gpus" and the Quota Management
System's "Subscription consumption T 4 / NCA 100 GPUs" and "Subscription NCA 100 GPUs". A usage is
matched by its name and display name with spaces and case ignored, every check says which usage it
read, and when none matches the check says so and lets the run go on: an unknown name must never
refuse a run that Azure would accept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aca_gpu.errors import QuotaError
from aca_gpu.gpu.profiles import GpuProfile
from aca_gpu.models import UsageInfo

QUOTA_REQUEST_HINT = (
    "request more GPU quota for Azure Container Apps in this region through the Quota Management System "
    "(Azure portal → Quotas → Azure Container Apps)"
)
SUBSCRIPTION_QUOTA_HINT = QUOTA_REQUEST_HINT + ", or try other regions with --regions"
# `acagpu check` has no --regions: it checks the regions its -l options name
CHECK_QUOTA_HINT = QUOTA_REQUEST_HINT + ", or check other regions with -l REGION (repeatable)"
GPU_KEYS = ("a100", "t4")


def _flat(text: str | None) -> str:
    return re.sub(r"[^a-z0-9]", "", (text or "").lower())


def gpu_key(profile_type: str) -> str | None:
    """`a100` or `t4` for a profile type, the token GPU usage names carry (NCA100, T4)."""
    flat = _flat(profile_type)
    return next((key for key in GPU_KEYS if key in flat), None)


def matches(usage: UsageInfo, profile: GpuProfile) -> bool:
    """A GPU usage for this profile: names the GPU, counts GPUs, and is serverless exactly when the
    profile is (consumption quota and dedicated quota are separate)."""
    key = gpu_key(profile.type)
    for name in (usage.name, usage.display_name):
        flat = _flat(name)
        if key and key in flat and "gpu" in flat and ("consumption" in flat) == profile.serverless:
            return True
    return False


@dataclass(frozen=True)
class QuotaCheck:
    """One profile's GPU quota in one region against what a plan needs."""

    location: str
    profile_type: str
    needed: int  # GPUs the plan holds at once at least
    usage: str | None = None  # the usage name that was read; None when no usage matched
    used: float | None = None
    limit: float | None = None
    note: str | None = None

    @property
    def available(self) -> float | None:
        return None if self.used is None or self.limit is None else self.limit - self.used

    @property
    def ok(self) -> bool | None:
        """True/False when a usage was read; None when quota is unknown (the run goes on)."""
        return None if self.available is None else self.available >= self.needed

    def summary(self) -> str:
        if self.usage is None:
            return f"{self.profile_type}: quota not checked ({self.note or 'no GPU usage matched'})"
        return (
            f"{self.profile_type}: {self.used:g} of {self.limit:g} GPUs used "
            f"(usage {self.usage}), {self.needed} needed"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile_type,
            "usage": self.usage,
            "used": self.used,
            "limit": self.limit,
            "needed": self.needed,
            "ok": self.ok,
            "note": self.note,
        }

    def error(self) -> QuotaError:
        return QuotaError(
            f"{self.location}: not enough GPU quota for {self.profile_type}: {self.used:g} of "
            f"{self.limit:g} used (usage {self.usage}), {self.needed} needed",
            code="InsufficientGpuQuota",
            hint=SUBSCRIPTION_QUOTA_HINT,
        )


def needs(profiles: Sequence[GpuProfile]) -> dict[str, tuple[GpuProfile, int]]:
    """GPUs needed per profile type, from one profile per pair: one replica per pair on a serverless
    profile (each replica holds the profile's GPUs); one node for a dedicated profile."""
    total: dict[str, tuple[GpuProfile, int]] = {}
    for profile in profiles:
        _, before = total.get(profile.type, (profile, 0))
        total[profile.type] = (
            profile,
            before + profile.gpu_count if profile.serverless else max(before, profile.gpu_count),
        )
    return total


def check(
    location: str,
    usages: Sequence[UsageInfo],
    profile: GpuProfile,
    needed: int,
    read_error: str | None = None,
) -> QuotaCheck:
    """The quota check for one profile from the region's usages (the tightest matching one wins)."""
    if read_error is not None:
        return QuotaCheck(location, profile.type, needed, note=f"usages could not be read: {read_error}")
    found = [u for u in usages if matches(u, profile)]
    if not found:
        names = ", ".join(sorted(u.name for u in usages)) or "none"
        return QuotaCheck(
            location, profile.type, needed, note=f"no GPU usage matched among {len(usages)} ({names})"
        )
    tightest = min(found, key=lambda u: u.limit - u.current)
    return QuotaCheck(location, profile.type, needed, tightest.name, tightest.current, tightest.limit)
