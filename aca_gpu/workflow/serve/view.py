"""What `status` shows of a served run: its app's URL, how many replicas run now, and their spend.

A served run's group names its app (`acagpu:served`); the app's FQDN and replicas are read live, so
`status` says whether the app is at zero (billing nothing) or serving, and where it answers. An
app's replicas come and go with its traffic and leave no execution behind, so their time is read
from the app's system events (`ContainerStarted` to `ScaledIn` or `ContainerTerminated`, or to now
while a replica runs) and priced like any replica: an estimate that covers what the event stream
still holds (`replica_seconds_from`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from aca_gpu import cost, naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.engine.replicas import event_owner
from aca_gpu.workflow.serve.phases import event_time
from aca_gpu.workflow.serve.plan import TAG_SERVED

ENDS = ("ScaledIn", "ContainerTerminated")
EVENTS_READ = 500


def replica_seconds(events: Iterable[dict[str, Any]], app: str, now: float) -> tuple[float, int]:
    """(seconds, replicas) the app's replicas ran, from its events; a running one counts to `now`."""
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
    return total, len(seen)


def served_view(cloud: Cloud, resource_group: str, tags: dict[str, str]) -> dict[str, Any] | None:
    """{app, url, fqdn, replicas} of a served run; None for any other run. A read that fails says
    so in the view rather than failing `status`."""
    app = tags.get(TAG_SERVED)
    if not app:
        return None
    clients = getattr(cloud, "clients", None)
    view: dict[str, Any] = {"app": app, "url": None, "fqdn": None, "replicas": None}
    if clients is None:
        return view
    from aca_gpu.azure import served

    try:
        found = served.read_served(clients, resource_group, app)
        if found is None:
            view["error"] = "app not found (deleted, or not made yet)"
            return view
        view["fqdn"] = found.fqdn
        view["url"] = served.url_of(clients, found.fqdn) if found.fqdn else None
        view["replicas"] = len(cloud.list_app_replicas(resource_group, app))
        events = cloud.system_events(resource_group, app=app, tail=EVENTS_READ)
        seconds, count = replica_seconds(events, app, time.time())
        view["replica_seconds"] = round(seconds, 1)
        view["replicas_seen"] = count
        view["replica_seconds_from"] = f"the app's system events (the last {EVENTS_READ})"
        gpu = tags.get(naming.TAG_GPU)
        if gpu and found.cpu:
            rate, basis = cost.replica_rate(checks.resolve_profile(gpu), found.cpu, found.memory_gib)
            view["usd_estimate"] = round(seconds * rate, 4)
            view["usd_basis"] = basis
    except AcaGpuError as exc:
        view["error"] = exc.message
    return view
