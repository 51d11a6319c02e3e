"""A cold request's phases, from the platform's own events and the client's clock.

request sent (client) → AssigningReplica → PullingImage → ImagePulled → ContainerStarted (the
platform's events) → first byte → full answer (client). Each phase runs from one mark to the next
one that is known, so the phases of a cycle add up to its end-to-end time; event stamps have whole
seconds (the event stream's format), so a mark is never placed before the one it follows nor after
the answer. `clock` says which clock each mark was read on: `platform` (an emulator scales it) or
`wall` (the client's own).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aca_gpu.workflow.engine.phases import pull_of
from aca_gpu.workflow.engine.replicas import event_owner
from aca_gpu.workflow.spend.served import event_time

MARKS = (  # (event reason, the phase that ends at it)
    ("AssigningReplica", "request to scheduling"),
    ("PullingImage", "placement"),
    ("ImagePulled", "image pull"),
    ("ContainerStarted", "container start"),
)
STAMP_RESOLUTION_S = 1.0  # the event stream's TimeStamp has whole seconds


def _field(event: dict[str, Any], *names: str) -> str:
    lowered = {str(k).lower(): v for k, v in event.items()}
    return next((str(lowered[n]) for n in names if lowered.get(n) not in (None, "")), "")


def first_after(events: Iterable[dict[str, Any]], app: str, since: float) -> dict[str, tuple[float, str]]:
    """reason -> (time, message) of the first of each mark's events of `app` from `since` on (a
    whole second of slack: the stamps are truncated)."""
    found: dict[str, tuple[float, str]] = {}
    for event in events:
        if event_owner(event) != app:
            continue
        reason, when = _field(event, "reason"), event_time(event)
        if when is None or when < since - STAMP_RESOLUTION_S or reason in found:
            continue
        found[reason] = (when, _field(event, "msg", "message"))
    return found


def cycle_phases(
    events: Iterable[dict[str, Any]], app: str, *, sent: float, first_byte: float | None, end: float
) -> dict[str, Any]:
    """The phases of one cold request (module doc); `sent`, `first_byte` and `end` are the client's
    Unix times. `sum_s` is what the phases add up to, `end_to_end_s` the client's own figure."""
    marks = first_after(events, app, sent)
    phases: list[dict[str, Any]] = []
    last = sent
    for reason, name in MARKS:
        if reason not in marks:
            continue
        at = min(max(marks[reason][0], last), end)
        phases.append({"phase": name, "seconds": round(at - last, 3), "until": reason, "clock": "platform"})
        last = at
    if first_byte is not None:
        at = min(max(first_byte, last), end)
        phases.append(
            {
                "phase": "load and first byte",
                "seconds": round(at - last, 3),
                "until": "first byte",
                "clock": "wall",
            }
        )
        last = at
    phases.append(
        {"phase": "answer", "seconds": round(end - last, 3), "until": "full answer", "clock": "wall"}
    )
    doc: dict[str, Any] = {
        "phases": phases,
        "end_to_end_s": round(end - sent, 3),
        "sum_s": round(sum(p["seconds"] for p in phases), 3),
        "woke_from_zero": "AssigningReplica" in marks,
    }
    pulled = marks.get("ImagePulled")
    if pulled is not None:
        doc["image_pull"] = pull_of(pulled[1])
    return doc


def phase_stats(cycles: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """p50/p95 of each phase over the cycles (a phase a cycle lacks is left out of its figures)."""
    from aca_gpu.workflow.serve.http import percentiles

    names: dict[str, list[float]] = {}
    for cycle in cycles:
        for phase in cycle.get("phases") or []:
            names.setdefault(phase["phase"], []).append(float(phase["seconds"]))
        names.setdefault("end to end", []).append(float(cycle.get("end_to_end_s") or 0.0))
    return {name: percentiles(values, (50, 95)) for name, values in names.items()}
