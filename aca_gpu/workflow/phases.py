"""Where a pair's time went, in the platform's own words: its system events.

The kubelet says how long a pull took (`Successfully pulled image "X" in 20.5s (...)`) and newer ones
its size (`Image size: N bytes`); that, not a client's guess, is what `up` and `validate` report as
the image pull, with MB/s, so users see which images pull slowly where. Scheduling (AssigningReplica
→ PullingImage) and container start (ImagePulled → ContainerStarted) come from the events' times.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from aca_gpu.naming import parse_iso_utc

PULLED = re.compile(
    r'Successfully pulled image "(?P<image>[^"]+)" in (?P<amount>[\d.]+)(?P<unit>ms|s)\b'
    r"(?:.*?Image size: (?P<size>\d+) bytes)?"
)


def _field(event: dict[str, Any], *names: str) -> str:
    lowered = {str(k).lower(): v for k, v in event.items()}
    return next((str(lowered[n]) for n in names if lowered.get(n) not in (None, "")), "")


def _when(event: dict[str, Any]) -> datetime | None:
    text = _field(event, "timestamp", "time")
    return parse_iso_utc(text.replace(" +0000 UTC", "Z").replace(" ", "T")) if text else None


def pull_of(message: str) -> dict[str, Any] | None:
    """{image, seconds, bytes, mb_per_s} from an ImagePulled message, None for any other text."""
    found = PULLED.search(message)
    if found is None:
        return None
    seconds = float(found["amount"]) / (1000.0 if found["unit"] == "ms" else 1.0)
    size = int(found["size"]) if found["size"] else None
    rate = round(size / 1e6 / seconds, 1) if size and seconds > 0 else None
    return {"image": found["image"], "seconds": round(seconds, 3), "bytes": size, "mb_per_s": rate}


def phases_of(events: Iterable[dict[str, Any]], owner: str) -> dict[str, Any]:
    """The phases of the last replica of `owner` (an app or job name) that the events describe."""
    mine = [e for e in events if _field(e, "containerappname", "jobname") == owner]
    times: dict[str, datetime] = {}
    pull: dict[str, Any] | None = None
    for event in mine:
        reason, when = _field(event, "reason"), _when(event)
        if reason == "ImagePulled":
            pull = pull_of(_field(event, "msg", "message")) or pull
        if when is not None and reason in (
            "AssigningReplica",
            "PullingImage",
            "ImagePulled",
            "ContainerStarted",
        ):
            times[reason] = when
    doc: dict[str, Any] = {}
    if pull is not None:
        doc["image_pull"] = pull
    for name, start, end in (
        ("scheduling_s", "AssigningReplica", "PullingImage"),
        ("container_start_s", "ImagePulled", "ContainerStarted"),
    ):
        if start in times and end in times and times[end] >= times[start]:
            doc[name] = round((times[end] - times[start]).total_seconds(), 3)
    return doc
