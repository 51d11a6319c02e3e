"""What a served app's replicas have cost: their lives from the app's system events.

A served app's replicas come and go with its traffic and leave no execution behind, and ARM lists
only the live ones, so their time is read from the app's system events: `ContainerStarted` to
`ScaledIn` or `ContainerTerminated` (or to now while a replica runs). It is priced like any GPU
replica's time (`cost.run_spend`), so `status` (the run's spend and its `served` view), the line
`down` and `reap` leave in the ledger for `acagpu cost`, and the bill all speak of one figure. It is
an estimate that covers what the event stream still holds (`EVENTS_FROM`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aca_gpu.models import Cloud
from aca_gpu.workflow.engine.replicas import event_owner

ENDS = ("ScaledIn", "ContainerTerminated")
EVENTS_READ = 500
EVENTS_FROM = f"the app's system events (the last {EVENTS_READ})"


@dataclass(frozen=True)
class ServedTime:
    """How long a served app's replicas have run, and how many of them the events show."""

    seconds: float
    replicas: int
    running: int = 0  # replicas started and not yet ended by the events read


def event_time(event: dict[str, Any]) -> float | None:
    """An event's time as a Unix timestamp (`2026-11-29 00:12:03 +0000 UTC` or ISO)."""
    lowered = {str(k).lower(): v for k, v in event.items()}
    text = str(lowered.get("timestamp") or lowered.get("time") or "").replace(" +0000 UTC", "+00:00")
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def replica_seconds(events: Iterable[dict[str, Any]], app: str, now: float) -> ServedTime:
    """The app's replicas' time from its events; a replica still running counts to `now`."""
    started: dict[str, float] = {}
    total, seen = 0.0, set()
    for event in sorted(events, key=lambda e: event_time(e) or 0.0):
        lowered = {str(k).lower(): v for k, v in event.items()}
        replica, reason, when = (
            str(lowered.get("replicaname") or ""),
            str(lowered.get("reason") or ""),
            event_time(event),
        )
        if event_owner(event) != app or not replica or when is None:
            continue
        if reason == "ContainerStarted" and replica not in started:
            started[replica] = when
            seen.add(replica)
        elif reason in ENDS and replica in started:
            total += max(0.0, when - started.pop(replica))
    total += sum(max(0.0, now - at) for at in started.values())
    return ServedTime(total, len(seen), len(started))


def served_time(cloud: Cloud, resource_group: str, app: str, now: float) -> ServedTime:
    """Read the app's events and add up its replicas' time (AcaGpuError when they cannot be read)."""
    events = cloud.system_events(resource_group, app=app, tail=EVENTS_READ)
    return replica_seconds(events, app, now)
