"""Where a served app's start stands, in the platform's words, said while `serve` waits for its
first answer (every wait says what it waits for), not only when the wait ends.

The platform says it through the app's replicas (their running-state details) and system events:
a replica waiting for a node (`AssigningReplica`), an image pull begun and not ended
(`PullingImage` with no `ImagePulled`), a container started whose startup probe has not passed
(`ReplicaUnhealthy` per failed look). A revision that counts replicas while the platform lists
none has had no node take them: no capacity for the GPU there (ACA has no queue for GPUs, the app
stays activating); that is said at once, as a warning, since nothing else will say it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aca_gpu.models import ReplicaInfo
from aca_gpu.units import duration_text
from aca_gpu.workflow.engine.replicas import event_owner
from aca_gpu.workflow.spend.served import event_time


@dataclass(frozen=True)
class Standing:
    """One look's finding: what the start waits on, and whether no node has taken the replica."""

    text: str
    unplaced: bool = False


def _fields(event: dict[str, Any]) -> tuple[str, str, str]:
    lowered = {str(k).lower(): v for k, v in event.items()}
    return (
        str(lowered.get("replicaname") or ""),
        str(lowered.get("reason") or ""),
        str(lowered.get("msg") or lowered.get("message") or ""),
    )


def _for(seconds: float | None) -> str:
    return f" for {duration_text(seconds)}" if seconds is not None else ""


def standing(
    app: str,
    replicas: Sequence[ReplicaInfo],
    events: Iterable[dict[str, Any]],
    counted: int | None,
    now: float | None = None,
) -> Standing:
    """Where the start stands (module doc). `counted`: the replicas the app's revision counts (None
    when unread); `now`: the client's clock, for how long a phase has lasted."""
    now = time.time() if now is None else now
    if not replicas:
        if counted:
            return Standing(
                f"not placed: the revision counts {counted} replica(s) and the platform lists none, so no "
                "node has taken it (no capacity for this GPU here; ACA has no queue for GPUs: the app "
                "stays activating until capacity comes back)",
                unplaced=True,
            )
        return Standing("no replica yet: the platform is asked for one")
    replica = replicas[0]
    mine = [(event, *_fields(event)) for event in events if event_owner(event) == app]
    mine = [item for item in mine if item[1] in ("", replica.name)]
    last = mine[-1] if mine else None
    since = now - t if last is not None and (t := event_time(last[0])) is not None else None
    reasons = [reason for _, _, reason, _ in mine]
    details = " ".join(
        t for t in (replica.details, *(c.details for c in replica.containers)) if t and t != "Running"
    )
    name = replica.name
    assigning = "AssigningReplica" in details or reasons[-1:] == ["AssigningReplica"]
    if assigning and "ContainerStarted" not in reasons:
        return Standing(f"not placed yet: replica {name} waits for a node (AssigningReplica{_for(since)})")
    if reasons and _last(reasons, "PullingImage") > _last(reasons, "ImagePulled"):
        pulling = next(msg for _, _, reason, msg in reversed(mine) if reason == "PullingImage")
        return Standing(f"pulling the image{_for(since)}, not ended yet ({pulling})")
    latest = mine[_last(reasons, "ContainerStarted") + 1 :]
    failed = [msg for _, _, reason, msg in latest if reason == "ReplicaUnhealthy"]
    if failed:
        return Standing(
            f'the model loads: its startup probe failed {len(failed)} look(s) so far ("{failed[-1]}")'
        )
    if replica.running_state == "Running" or "ContainerStarted" in reasons:
        started = _last(reasons, "ContainerStarted")
        when = event_time(mine[started][0]) if started >= 0 else None
        return Standing(
            f"container started{_for(now - when if when is not None else None)}: the model loads "
            "(no answer yet)"
        )
    said = f"{last[2]}: {last[3]}" if last is not None else details or "starting"
    return Standing(f"replica {name}: {said}")


def _last(reasons: list[str], name: str) -> int:
    return max((i for i, r in enumerate(reasons) if r == name), default=-1)
