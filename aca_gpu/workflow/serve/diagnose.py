"""Why a served app has not answered, from the platform's own words: its replicas' running-state
details and its system events, read while `serve` waits for the first answer.

Three findings end the wait at once, since waiting longer cannot help: a replica the platform could
not place ("WorkLoad Profile Full": capacity, exit 3), a container killed for memory (`OOMKilled`:
the model does not fit the replica, exit 5, as an image that cannot run) and a startup probe that
failed every look up to the load timeout (the platform restarts the container: exit 4, the wait for
the model's answer ran out, `ProbeFailed`; not 5, since a probe that never passes says no more than
that `--health` did not answer in time: a wrong path or port, or a slow load, as much as a broken
image). Others explain a wait that ran out (exit 4): an image pull that never ended, a replica never
placed. Each message quotes the platform.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError, GpuCheckFailed, QuotaError, WaitTimedOut
from aca_gpu.models import Cloud, ReplicaInfo
from aca_gpu.units import duration_text
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine import capacity
from aca_gpu.workflow.engine.replicas import event_owner
from aca_gpu.workflow.serve import waiting

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


def probe_text(probe: dict[str, Any], load_timeout_s: float) -> str:
    """How the startup probe `serve` set looks, in one phrase: what it asks, where, how often."""
    http = probe.get("httpGet") or {}
    looks, period = int(probe.get("failureThreshold") or 1), int(probe.get("periodSeconds") or 1)
    first = int(probe.get("initialDelaySeconds") or 0)
    whole = f"{int(load_timeout_s)}s" if load_timeout_s < 120 else duration_text(load_timeout_s)
    return (
        f"GET {http.get('path', '/')} on port {http.get('port')}, {looks} look(s) {period} s apart "
        f"from {first} s after the container started (--load-timeout {whole}: the platform restarts "
        "the container after the last)"
    )


def probe_failed(app: str, probe: str, events: list[tuple[str, str]]) -> WaitTimedOut:
    """The startup probe failed its last look: the platform restarts the container (exit 4)."""
    said = [m for r, m in events if r == "ReplicaUnhealthy" or "probe failed" in m.lower()]
    stop = next((m for r, m in reversed(events) if "failed startup probe" in m.lower()), "")
    words = "; ".join(f'"{m}"' for m in [*said[-1:], stop] if m)
    return WaitTimedOut(
        f"{app}'s startup probe never passed: {probe}; the platform says {words}",
        code="ProbeFailed",
        hint="check that the model answers --health on --port once loaded (`acagpu logs --run-id ...` "
        "shows how far it got); a slower load needs a longer --load-timeout (at most 37 min)",
    )


def decisive(
    app: str, replicas: Iterable[ReplicaInfo], events: Iterable[dict[str, Any]], probe: str = ""
) -> AcaGpuError | None:
    """A finding that ends the wait now, or None. `probe`: the startup probe in words (probe_text)."""
    for replica in replicas:
        texts = [replica.details or "", *(c.details or "" for c in replica.containers)]
        found = capacity.evidence(texts)
        if found:
            return QuotaError(
                f'no capacity for {app}\'s replica: the platform says "{found[0]}"',
                code="CapacityUnavailable",
                hint="serve in another region or environment (`--env`, `-l`), or another GPU (`--gpu`)",
            )
    seen = _events_of(events, app)
    for reason, message in seen:
        if "OOMKilled" in message or reason == "OOMKilled":
            return GpuCheckFailed(
                f"{app}'s container was killed for memory while the model loaded: {reason}: {message}",
                code="OOMKilled",
                hint="give the replica more memory (`--memory`, within the profile), or serve a smaller "
                "model; `acagpu logs --run-id ...` shows how far the load got",
            )
    if any("failed startup probe" in message.lower() for _, message in seen):
        return probe_failed(app, probe or "its startup probe", seen)
    return None


def _last(reasons: list[str], name: str) -> int:
    return max((i for i, r in enumerate(reasons) if r == name), default=-1)


def after_timeout(
    app: str, health: str, events: Iterable[dict[str, Any]], waited: str, probe: str = ""
) -> WaitTimedOut:
    """Why no answer came within the load timeout, from the last of the app's events (exit 4)."""
    seen = _events_of(events, app)
    reasons = [r for r, _ in seen]
    last = seen[-1] if seen else ("", "")
    failed = [m for r, m in seen if r in ("ProbeFailed", "ReplicaUnhealthy") or "probe" in m.lower()]
    if failed:
        why = f"the startup probe ({probe or health}) never passed (the platform's last word: {failed[-1]})"
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


def _said(_: str) -> None:
    return None


@dataclass
class Watch:
    """Looks at the app every LOOK_S while `serve` waits: `found` is set when waiting cannot help;
    `on_wait` hears where the start stands whenever that changes (waiting.py), `on_warn` once that
    no node has taken the replica (two looks in a row, so a list read mid-create is no alarm)."""

    cloud: Cloud
    resource_group: str
    app: str
    look_s: float = LOOK_S
    probe: str = ""  # the startup probe in words (probe_text), for a finding about it
    counted: Callable[[], int | None] = lambda: None  # replicas the app's revision counts
    on_wait: Callable[[str], None] = _said
    on_warn: Callable[[str], None] = _said
    stop: threading.Event = field(default_factory=threading.Event)
    found: AcaGpuError | None = None

    def start(self) -> Watch:
        spawn(self._run, "acagpu-serve-watch")
        return self

    def _run(self) -> None:
        said, unplaced, warned = "", 0, False
        while not self.stop.is_set():
            try:
                replicas = self.cloud.list_app_replicas(self.resource_group, self.app)
                events = self.cloud.system_events(self.resource_group, app=self.app, tail=EVENTS_TAIL)
                counted = self.counted() if not replicas else None
            except AcaGpuError:  # one failed look says nothing
                self.stop.wait(self.look_s)
                continue
            self.found = decisive(self.app, replicas, events, self.probe)
            if self.found is not None:
                return
            now = waiting.standing(self.app, replicas, events, counted)
            unplaced = unplaced + 1 if now.unplaced else 0
            if unplaced >= 2 and not warned:
                warned = True
                self.on_warn(f"{self.app}: {now.text}")
            if now.text != said:
                said = now.text
                self.on_wait(said)
            self.stop.wait(self.look_s)
