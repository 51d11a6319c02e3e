"""Why a served app has not answered, from the platform's own words: its replicas' running-state
details and its system events, read while `serve` waits for the first answer.

Two findings end the wait at once, since waiting longer cannot help: a replica the platform could
not place ("WorkLoad Profile Full": capacity, exit 3) and a container killed for memory
(`OOMKilled`: the model does not fit the replica, exit 5, as an image that cannot run). Others
explain a wait that ran out (exit 4): an image pull that never ended, a startup probe that never
passed, a replica never placed. Each message quotes the platform.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError, GpuCheckFailed, QuotaError, WaitTimedOut
from aca_gpu.models import Cloud, ReplicaInfo
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine.replicas import event_owner

CAPACITY = "WorkLoad Profile Full"
LOOK_S = 2.0  # at most between two looks at the app's replicas and events (less with a short poll)
EVENTS_TAIL = 200


def _events_of(events: Iterable[dict[str, Any]], app: str) -> list[tuple[str, str]]:
    found = []
    for event in events:
        if event_owner(event) != app:
            continue
        lowered = {str(k).lower(): v for k, v in event.items()}
        found.append(
            (str(lowered.get("reason") or ""), str(lowered.get("msg") or lowered.get("message") or ""))
        )
    return found


def decisive(
    app: str, replicas: Iterable[ReplicaInfo], events: Iterable[dict[str, Any]]
) -> AcaGpuError | None:
    """A finding that ends the wait now, or None."""
    for replica in replicas:
        texts = [replica.details or "", *(c.details or "" for c in replica.containers)]
        if any(CAPACITY in t for t in texts):
            return QuotaError(
                f'no capacity for {app}\'s replica: the platform says "{CAPACITY}"',
                code="CapacityUnavailable",
                hint="serve in another region or environment (`--env`, `-l`), or another GPU (`--gpu`)",
            )
    for reason, message in _events_of(events, app):
        if "OOMKilled" in message or reason == "OOMKilled":
            return GpuCheckFailed(
                f"{app}'s container was killed for memory while the model loaded: {reason}: {message}",
                code="OOMKilled",
                hint="give the replica more memory (`--memory`, within the profile), or serve a smaller "
                "model; `acagpu logs --run-id ...` shows how far the load got",
            )
    return None


def _last(reasons: list[str], name: str) -> int:
    return max((i for i, r in enumerate(reasons) if r == name), default=-1)


def after_timeout(app: str, health: str, events: Iterable[dict[str, Any]], waited: str) -> WaitTimedOut:
    """Why no answer came within the load timeout, from the last of the app's events (exit 4)."""
    seen = _events_of(events, app)
    reasons = [r for r, _ in seen]
    last = seen[-1] if seen else ("", "")
    probe = [m for r, m in seen if r in ("ProbeFailed", "ReplicaUnhealthy") or "probe" in m.lower()]
    if probe:
        why = f"the startup probe on {health} never passed (the platform's last word: {probe[-1]})"
        code = "ProbeFailed"
    elif _last(reasons, "PullingImage") > _last(reasons, "ImagePulled"):
        why = f"the image pull never ended: the last event is {last[0]}: {last[1]}"
        code = "PullStalled"
    elif not any(r in ("PullingImage", "ImagePulled", "ContainerStarted") for r in reasons):
        why = "no replica was placed (no pull began): the region may have no capacity for it"
        code = "ReplicaNotPlaced"
    else:
        why = f"the model did not answer {health} (the platform's last event: {last[0]}: {last[1]})"
        code = "NoAnswer"
    return WaitTimedOut(
        f"no answer from {app} within {waited}: {why}",
        code=code,
        hint="`acagpu logs --run-id ...` and the app's system events say more; --load-timeout gives a slow "
        "model longer",
    )


@dataclass
class Watch:
    """Looks at the app every LOOK_S while `serve` waits; `found` is set when waiting cannot help."""

    cloud: Cloud
    resource_group: str
    app: str
    look_s: float = LOOK_S
    stop: threading.Event = field(default_factory=threading.Event)
    found: AcaGpuError | None = None

    def start(self) -> Watch:
        spawn(self._run, "acagpu-serve-watch")
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                replicas = self.cloud.list_app_replicas(self.resource_group, self.app)
                events = self.cloud.system_events(self.resource_group, app=self.app, tail=EVENTS_TAIL)
            except AcaGpuError:  # one failed look says nothing
                replicas, events = [], []
            self.found = decisive(self.app, replicas, events)
            if self.found is not None:
                return
            self.stop.wait(self.look_s)
