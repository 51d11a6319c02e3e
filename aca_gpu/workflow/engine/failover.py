"""Region failover by blast radius: one table says what an error or a placement symptom means for a run.

- abort: nothing another region could fix (authentication, a disabled or unknown subscription, bad
  input, an unregistered provider, a GPU verdict).
- next region: the region cannot place this plan now (profile not offered, regional quota exhausted,
  capacity unavailable, "WorkLoad Profile Full", a replica stuck or an empty replica list past its
  deadline). The engine tears the attempt down and tries the next region of the plan.
- retry here: throttling and transient 5xx. These are retried where they happen (azure-core's retry
  policy honours Retry-After; the runtime retries its reads), so they never move a run: a region is
  not to blame for a subscription-wide throttle, and a new region would cost another environment.

Default region order (when neither `--regions`, the `regions` config key nor `-l` is given): for the
serverless A100 (`a100`, Consumption-GPU-NC24-A100) the configured location, then `A100_ORDER`, at
most `DEFAULT_ATTEMPTS` regions in all. A100 capacity is scarce (no new NC A100 capacity since
mid-2025), T4 is widely offered, so `t4` and every other profile use the requested region only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aca_gpu.errors import (
    AcaGpuError,
    AuthError,
    BadInput,
    GpuCheckFailed,
    InfraError,
    Interrupted,
    PreflightRefused,
    QuotaError,
    WaitTimedOut,
)

ABORT = "abort"
NEXT_REGION = "next-region"
RETRY_HERE = "retry-here"

A100_TYPE = "Consumption-GPU-NC24-A100"
# Regions that offer the serverless A100 (gpu/data profiles), in the order tried after the configured
# location. canadacentral and uksouth placed A100 runs where others did not; swedencentral placed 1
# A100 job in 16 in Aug 2026 (each BackoffLimitExceeded 2 s after scheduling,
# microsoft/azure-container-apps#1809), so it is tried last. The other two are third-party reports
# with no public link: UNCONFIRMED.
A100_ORDER = (
    "westus3",
    "canadacentral",
    "uksouth",
    "australiaeast",
    "eastus",
    "westus",
    "italynorth",
    "brazilsouth",
    "swedencentral",
)
DEFAULT_ATTEMPTS = 3
MAX_REGIONS = 8


@dataclass(frozen=True)
class Rule:
    """One row: errors of these types, these codes, or whose text matches `text`, have this radius."""

    blast: str
    reason: str
    kinds: tuple[type[AcaGpuError], ...] = ()
    codes: tuple[str, ...] = ()
    text: str | None = None

    def matches(self, error: AcaGpuError) -> bool:
        if self.kinds and isinstance(error, self.kinds):
            return True
        if self.codes and (error.code or "").lower() in {c.lower() for c in self.codes}:
            return True
        return bool(self.text and re.search(self.text, error.message, re.I))


# First match wins: specific symptoms before the broad error types.
TABLE: tuple[Rule, ...] = (
    Rule(ABORT, "interrupted", kinds=(Interrupted,), codes=("Cancelled",), text=r": cancelled\b"),
    Rule(ABORT, "GPU verdict", kinds=(GpuCheckFailed,)),
    Rule(ABORT, "authentication", kinds=(AuthError,)),
    Rule(
        ABORT,
        "subscription disabled or unknown",
        codes=("SubscriptionNotFound", "SubscriptionDisabled", "ReadOnlyDisabledSubscription"),
    ),
    Rule(ABORT, "provider not registered", codes=("MissingSubscriptionRegistration",)),
    Rule(NEXT_REGION, "WorkLoad Profile Full", text=r"workload ?profile ?full"),
    Rule(
        NEXT_REGION,
        "profile not offered",
        codes=(
            "ProfileNotOffered",
            "LocationNotAvailableForResourceType",
            "NoRegisteredProviderFound",
            "WorkloadProfileTypeNotSupported",
            "InvalidWorkloadProfileType",
        ),
    ),
    Rule(NEXT_REGION, "quota or capacity exhausted", kinds=(QuotaError,)),
    Rule(
        NEXT_REGION,
        "replica not placed by its deadline",
        codes=("ReplicaNotRunning",),
        # a run's container or a tester with no replica ever placed by --max-minutes (AssigningReplica
        # all along: ACA's no-capacity symptom, microsoft/azure-container-apps#1579)
        text=r"timed out after .*waiting for a running replica|never started: no replica of it ran"
        r"|never placed before its deadline",
    ),
    Rule(RETRY_HERE, "throttled", codes=("429", "TooManyRequests")),
    Rule(RETRY_HERE, "transient service error", kinds=(InfraError,)),
    Rule(ABORT, "bad input", kinds=(BadInput, PreflightRefused)),
    Rule(ABORT, "deadline", kinds=(WaitTimedOut,)),
)


def classify(error: AcaGpuError) -> tuple[str, str]:
    """(blast radius, reason) of an error; anything the table does not know aborts."""
    for rule in TABLE:
        if rule.matches(error):
            return rule.blast, rule.reason
    return ABORT, "not a placement failure"


@dataclass
class Attempt:
    """One region tried by a run: where, why it ended, and what it cost."""

    region: str
    resource_group: str
    gpu: str | None = None  # the GPU alias tried (`--gpu a100,t4` falls back from one to the next)
    status: str = "used"  # used | refused (nothing created) | abandoned (created, then torn down)
    reason: str | None = None
    blast: str | None = None
    seconds: float = 0.0
    gpu_seconds: float = 0.0
    cost: dict[str, Any] | None = None
    teardown: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "gpu": self.gpu,
            "resource_group": self.resource_group,
            "status": self.status,
            "reason": self.reason,
            "blast": self.blast,
            "seconds": round(self.seconds, 1),
            "gpu_seconds": round(self.gpu_seconds, 1),
            "cost": self.cost,
            "teardown": self.teardown,
        }


def default_regions(location: str, profile_types: list[str], location_given: bool) -> tuple[str, ...]:
    """The documented order for the serverless A100 when no region was named; else `location` only."""
    if location_given or not profile_types or any(t != A100_TYPE for t in profile_types):
        return (location,)
    order = [location, *(r for r in A100_ORDER if r != location)]
    return tuple(order[:DEFAULT_ATTEMPTS])
