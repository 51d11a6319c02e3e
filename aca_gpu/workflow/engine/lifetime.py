"""How far an attempt's GPU-seconds can be trusted, and the platform's bound on them.

A container's billed life is measured on this client's clock: from the moment a look or its log
stream saw it start to the moment its end was seen. Faults between client and platform spoil that
evidence: a log stream cut before it was accepted hides the start (a 1 s container read 0.001 s),
failed status reads make the end late (49.9 s for a 1 s container), slow or failed listings widen
the looks around a shard's start and end (+18 to +116 %). The figure then stays an estimate, and
the document says so (`gpu_seconds_quality`, `estimated`, the reason) instead of passing it off as
measured.

What the platform itself says bounds it: an execution's own start and end times (ARM, whole
seconds) hold its replica's whole life, placement and pull included, so no figure is above them;
and where the client's own evidence was lost, the platform's events (`ContainerStarted` to
`ContainerTerminated`, whole seconds on Azure) stand in for it when they were read. A shard reads
them per execution (`container_times`, its replica's events) and narrows each whole second by what
its own looks still allow (`within_events`): a fan-out's figure then is as true as a run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aca_gpu.naming import parse_iso_utc

MEASURED = "measured"  # this client saw the container start and end
PLATFORM = "platform-events"  # the client's evidence was lost: the platform's events stood in
ESTIMATED = "estimated"  # neither: a figure within the platform's bound, with the reason
_RANK = {MEASURED: 0, PLATFORM: 1, ESTIMATED: 2}
ARM_GRAIN_S = 1.0  # ARM gives an execution's start and end in whole seconds
EVENTS_GRAIN_S = 1.0  # and the system events their times (`2023-06-27 03:58:10 +0000 UTC`)


@dataclass(frozen=True)
class Lifetime:
    """One container's billed seconds and how they were known."""

    seconds: float
    quality: str = MEASURED
    why: str = ""


def arm_window(start_time: str | None, end_time: str | None) -> float | None:
    """The most an ended execution's replica can have lived: its start-to-end by ARM (placement and
    pull included), plus a second for ARM's whole seconds; None while either is unknown."""
    start, end = parse_iso_utc(start_time or ""), parse_iso_utc(end_time or "")
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds()) + ARM_GRAIN_S


Span = tuple[float, float]  # (earliest, latest) a moment can be, epoch seconds


def within_events(events: Span, start: Span | None = None, end: Span | None = None) -> float:
    """A container's life from its events: `events` is (ContainerStarted, ContainerTerminated) in
    the platform's whole seconds (each moment lies in the second after its stamp), `start` and
    `end` what the client's own looks or stream allow for each moment (on this host's wall clock).
    Each moment is the middle of its second narrowed by the client's span; where a span misses its
    second altogether (the two clocks disagree, or a stream's start came late), the events' own
    difference is taken: it needs no clock but the platform's."""
    moments = []
    for second, span in zip(events, (start, end), strict=True):
        low, high = second, second + EVENTS_GRAIN_S
        if span is not None:
            low, high = max(low, span[0]), min(high, span[1])
        if low > high:
            return max(0.0, events[1] - events[0])
        moments.append((low + high) / 2)
    return max(0.0, moments[1] - moments[0])


def judged(
    measured: float,
    *,
    lost: Sequence[str] = (),
    window: float | None = None,
    events_s: float | None = None,
) -> Lifetime:
    """The figure to bill and its quality. `lost`: what of the client's evidence was missing
    (empty: it was measured); `window`: the platform's bound (`arm_window`); `events_s`: the
    container's life by the platform's events (whole seconds: the true life is within a second
    of it), when they were read.

    With evidence lost, the events' figure stands in (or, unread, the measure stays, said to be an
    estimate); a measure the events rule out (a stream the service closed early looks like the
    container's exit) is taken at the nearest figure they allow, and said so; nothing is above the
    execution's own start-to-end."""
    seconds, quality, why = measured, MEASURED, ""
    if lost:
        said = "; ".join(lost)
        if events_s is not None and events_s > 0:
            seconds, quality = events_s, PLATFORM
            why = f"{said}: the platform's ContainerStarted to its end instead of {measured:.3f} s"
        else:
            quality, why = ESTIMATED, said
    elif events_s is not None and events_s > 0:
        low, high = max(0.0, events_s - EVENTS_GRAIN_S), events_s + EVENTS_GRAIN_S
        if not low <= measured <= high:
            seconds, quality = min(max(measured, low), high), ESTIMATED
            why = (
                f"{measured:.3f} s as measured is more than a second from the platform's "
                f"ContainerStarted to its end ({events_s:.0f} s): the nearest figure they allow"
            )
    if window is not None and seconds > window:
        over = (
            f"{seconds:.3f} s is more than the execution's own start-to-end by ARM "
            f"({window - ARM_GRAIN_S:.0f} s, pull included): bounded by it"
        )
        seconds, quality = window, ESTIMATED
        why = f"{why}; {over}" if why else over
    return Lifetime(seconds, quality, why)


def summary(lives: Iterable[tuple[str, Lifetime]]) -> dict[str, Any]:
    """The document's words on a run's figure: `gpu_seconds_quality` (the worst of its parts),
    `estimated`, and one note per container that was not measured."""
    quality, notes = MEASURED, []
    for label, life in lives:
        if _RANK[life.quality] > _RANK[quality]:
            quality = life.quality
        if life.quality != MEASURED:
            notes.append(f"{label}: {life.why}")
    return {"gpu_seconds_quality": quality, "estimated": quality == ESTIMATED, "gpu_seconds_notes": notes}


def quality_text(cost: dict[str, Any]) -> str | None:
    """The human line for a figure that was not measured well, None when it was."""
    quality = cost.get("gpu_seconds_quality")
    if quality in (None, MEASURED):
        return None
    notes = cost.get("gpu_seconds_notes") or []
    head = "estimated" if quality == ESTIMATED else "from the platform's events"
    more = f" (+{len(notes) - 1} more in -o json)" if len(notes) > 1 else ""
    return f"{head}: {notes[0]}{more}" if notes else head
