"""A kept run's spend, recorded on its own resource group: the one source of its figure.

A kept run billed in four places that each saw part of it: `up` its measured lives, `status` and
the guard ARM's execution times (which list no stopped app's past, so the explorer before it was
stopped and each `smi`/`exec` wake were missing), `cost` the estimate `up` left in the local ledger
(nothing after it). For one run they said $0.0011, $0.0018+, $0.0026 and $0.0039.

So what acagpu measured of a kept run is written where every reader finds it: two tags on the run's
group, `acagpu:spent-gpu-seconds` (GPU-seconds of every life that ended, as acagpu measured them) and
`acagpu:spent-at` (when that was). `up --keep`, `test --run-id` and each wake add to them (and each
adds a ledger line, so `cost`'s estimate is their sum); `status`, `reap` and the guard's script read
them and add only what ran after `spent-at` (an execution from its ARM start; an app that runs now
from `spent-at`, an upper bound). With nothing running, all four say the recorded figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud

if TYPE_CHECKING:  # `status` reads the tags without loading the run engine
    from aca_gpu.workflow.engine.outcome import RunOutcome

TAG_SPENT = "acagpu:spent-gpu-seconds"
TAG_SPENT_AT = "acagpu:spent-at"


def recorded(tags: Mapping[str, str]) -> tuple[float, datetime] | None:
    """(GPU-seconds, when) a group's tags record; None when it has none (or they cannot be read)."""
    lowered = {k.lower(): v for k, v in tags.items()}
    at = naming.parse_iso_utc(lowered.get(TAG_SPENT_AT, ""))
    try:
        seconds = float(lowered.get(TAG_SPENT, ""))
    except ValueError:
        return None
    return None if at is None or seconds < 0 else (seconds, at)


def add(cloud: Cloud, resource_group: str, gpu_seconds: float, now: datetime | None = None) -> str | None:
    """Add `gpu_seconds` (a life that just ended) to the group's record and move `spent-at` to now.
    Never fails the command that measured them: returns why it could not, else None."""
    when = now or datetime.now(UTC)
    try:
        group = cloud.get_resource_group(resource_group)
        if group is None:
            return f"resource group {resource_group} not found"
        before = recorded(group.tags)
        total = (before[0] if before else 0.0) + max(0.0, gpu_seconds)
        tags = {
            **group.tags,
            TAG_SPENT: f"{total:.3f}",
            # milliseconds: ARM stamps an execution's start in whole seconds, so one that began in
            # the record's own second (recorded already) is told from one that began after it
            TAG_SPENT_AT: when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        cloud.create_resource_group(resource_group, group.location, tags)
    except AcaGpuError as exc:
        return exc.message
    return None


def kept(cloud: Cloud, outcome: RunOutcome) -> None:
    """After `up --keep` or `test --run-id` on a kept run: its measured lives join the record
    (a run torn down has no group to carry one; a failure to write is no failure of the run)."""
    if outcome.teardown.status not in ("kept", "attached") or outcome.gpu_seconds <= 0:
        return
    add(cloud, outcome.plan.names.resource_group, outcome.gpu_seconds)
