"""Waiting for replicas and executions, and saying why they did not start.

ACA reports a stuck GPU replica only through its running-state details and the system event
stream (AssigningReplica, ContainerCreateFailure ...), so a timeout quotes those reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud, ReplicaInfo

RUNNING = "Running"


def replica_details(replicas: Iterable[ReplicaInfo]) -> list[str]:
    found: list[str] = []
    for replica in replicas:
        for text in (replica.running_state, replica.details, *(c.details for c in replica.containers)):
            if text and text not in found and text != RUNNING:
                found.append(text)
    return found


def event_reasons(events: Iterable[dict[str, Any]], limit: int = 3) -> list[str]:
    """The last distinct 'Reason: message' pairs of a system event list (field case varies)."""
    reasons: list[str] = []
    for event in events:
        lowered = {str(k).lower(): v for k, v in event.items()}
        reason = str(lowered.get("reason") or lowered.get("type") or "").strip()
        message = str(lowered.get("msg") or lowered.get("message") or "").strip()
        text = f"{reason}: {message}" if reason and message else reason or message
        if text and text not in reasons:
            reasons.append(text)
    return reasons[-limit:]


def event_reasons_of(cloud: Cloud, resource_group: str, environment: str) -> list[str]:
    """The environment's last system event reasons, for a message; empty when they cannot be read."""
    return safe_events(cloud, resource_group, environment=environment)


def safe_events(cloud: Cloud, resource_group: str, **where: str) -> list[str]:
    try:
        return event_reasons(cloud.system_events(resource_group, tail=30, **where))
    except AcaGpuError:
        return []


def owner_events(cloud: Cloud, resource_group: str, environment: str, owner: str) -> list[str]:
    """The reasons of one app's or job's events, read from its environment's stream (a job has no
    stream of its own there, and several runs share a warm environment); empty when unreadable."""
    try:
        events = cloud.system_events(resource_group, environment=environment, tail=200)
    except AcaGpuError:
        return []
    return event_reasons([e for e in events if event_owner(e).lower() == owner.lower()], limit=10)


# the emulator's `--workload host` says so when it puts more GPU replicas on a GPU than one (its
# host has fewer GPUs than replicas run at once); ACA gives each replica its own and has no such event
GPU_SHARED = "GpuShared"


def shared_in(events: Iterable[Mapping[str, Any]], owner: str) -> list[str]:
    """The messages of `owner`'s `GpuShared` events, one per replica that shared a GPU; empty on ACA."""
    found: list[str] = []
    for event in events:
        lowered = {str(k).lower(): v for k, v in event.items()}
        if event_owner(event).lower() == owner.lower() and str(lowered.get("reason") or "") == GPU_SHARED:
            found.append(str(lowered.get("msg") or lowered.get("message") or "").strip())
    return found


def event_owner(event: Mapping[str, Any]) -> str:
    """The app or job an environment's event is about (ContainerAppName / JobName), '' when none."""
    lowered = {str(k).lower(): v for k, v in event.items()}
    return str(lowered.get("containerappname") or lowered.get("jobname") or "")
