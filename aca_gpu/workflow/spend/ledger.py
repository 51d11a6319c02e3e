"""The local record of what each run was estimated to cost, for `acagpu cost` to set beside the bill.

A run's resource group is gone when its bill arrives (Cost Management lags by up to a day), so the
estimate acagpu printed at the end of the run is kept here: one JSON line per region attempt, in the
cache directory. Like all local state it is only a cache: a run made elsewhere (CI) has no line, and
`cost` then shows its bill without an estimate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aca_gpu import cost
from aca_gpu.errors import BadInput
from aca_gpu.models import Cloud
from aca_gpu.workflow.base.context import Run
from aca_gpu.workflow.spend import record as kept_record
from aca_gpu.workflow.spend.so_far import tagged_profile

if TYPE_CHECKING:  # `cost` reads the ledger without loading the run engine
    from aca_gpu.workflow.engine.outcome import RunOutcome


def ledger_path() -> Path:
    base = os.environ.get("ACAGPU_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "acagpu") / "runs.jsonl"


PUBLIC_ARM = "https://management.azure.com"


def arm_of(endpoint: str | None) -> str:
    """Which cloud a line belongs to: its ARM endpoint (an emulator's differs at every start, and
    every emulator answers with the same subscription id, so the id alone would mix them)."""
    return (endpoint or PUBLIC_ARM).rstrip("/").lower()


def record(cloud: Cloud, outcome: RunOutcome, path: Path | None = None) -> None:
    """Append one line per attempt that ran anything; never fails the run for a disk problem."""
    subscription = str(getattr(cloud, "subscription_id", "") or "")
    settings = getattr(getattr(cloud, "clients", None), "settings", None)
    arm = arm_of(getattr(settings, "arm_endpoint", None))
    profile = outcome.plan.pairs[0].profile
    table = cost.load_prices()
    cap = outcome.plan.spend_cap  # --max-cost: `cost` sets it beside the bill
    capped = {"max_cost_usd": cap.cap_usd} if cap is not None else {}
    lines = []
    for attempt in outcome.attempts:
        try:
            est = cost.estimate(profile, attempt.gpu_seconds, location=attempt.region, prices=table)
        except BadInput:
            continue
        lines.append(
            {
                "run_id": outcome.plan.run_id,
                "subscription": subscription,
                "arm": arm,
                "resource_group": attempt.resource_group,
                "location": attempt.region,
                "profile": profile.type,
                "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "gpu_seconds": attempt.gpu_seconds,
                "usd_estimate": est.usd,
                "prices": est.table,
                "kept": outcome.plan.keep,
                **capped,
            }
        )
    _append(lines, path)


def record_wake(cloud: Cloud, run: Run, gpu_seconds: float, path: Path | None = None) -> None:
    """One line for a kept run's later life (an `smi`/`exec` wake of its explorer): `cost` sums a
    run's lines, so its estimate is the run's whole life, as the group's record is (record.py)."""
    profile = tagged_profile(run.tags)
    if profile is None:
        return
    settings = getattr(getattr(cloud, "clients", None), "settings", None)
    try:
        est = cost.estimate(profile, gpu_seconds, location=run.group.location)
    except BadInput:
        return
    line = {
        "run_id": run.run_id,
        "subscription": str(getattr(cloud, "subscription_id", "") or ""),
        "arm": arm_of(getattr(settings, "arm_endpoint", None)),
        "resource_group": run.resource_group,
        "location": run.group.location,
        "profile": profile.type,
        "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpu_seconds": gpu_seconds,
        "usd_estimate": est.usd,
        "prices": est.table,
        "kept": True,
        "what": "explorer wake",
    }
    _append([line], path)


def record_served(cloud: Cloud, run: Run, path: Path | None = None) -> float | None:
    """A served run's line, written as it is torn down (`down`, `reap`, serve's own teardown, the
    API's block): its replicas' time from the app's events, the figure `status` showed
    (`so_far.run_spend`), since a served app has no end that `run` would record. Returns the
    estimate (None when the run's GPU or its events could not be read: no line then)."""
    from aca_gpu.workflow.spend.so_far import run_spend, tagged_profile

    spent = run_spend(cloud, run, datetime.now(UTC))
    if spent.estimate is None:
        return None
    settings = getattr(getattr(cloud, "clients", None), "settings", None)
    line = {
        "run_id": run.run_id,
        "subscription": str(getattr(cloud, "subscription_id", "") or ""),
        "arm": arm_of(getattr(settings, "arm_endpoint", None)),
        "resource_group": run.resource_group,
        "location": run.group.location,
        "profile": getattr(tagged_profile(run.tags), "type", None),
        "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpu_seconds": spent.gpu_seconds,
        "usd_estimate": spent.estimate.usd,
        "prices": spent.estimate.table,
        "kept": False,
        "served": True,
        **tagged_cap(run.tags),
    }
    _append([line], path)
    return spent.estimate.usd


def tagged_cap(tags: dict[str, str] | Any) -> dict[str, float]:
    """`{"max_cost_usd": X}` from a run's `acagpu:max-cost` tag, else nothing."""
    from aca_gpu.naming import TAG_MAX_COST

    try:
        return {"max_cost_usd": float(dict(tags or {})[TAG_MAX_COST])}
    except (KeyError, ValueError):
        return {}


def record_served_group(cloud: Cloud, resource_group: str) -> float | None:
    """`record_served` for a group known by name (reap, serve's own teardown, the API's block):
    best effort, so a failed read never holds the teardown that follows."""
    from aca_gpu.errors import AcaGpuError
    from aca_gpu.workflow.base.context import run_from_group

    try:
        group = cloud.get_resource_group(resource_group)
        return None if group is None else record_served(cloud, run_from_group(group))
    except AcaGpuError:
        return None


def _append(lines: list[dict[str, Any]], path: Path | None) -> None:
    if not lines:
        return
    target = path or ledger_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)
    except OSError:
        pass


def read(path: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded attempt; unreadable lines are skipped (a cache, not a source of truth)."""
    try:
        text = (path or ledger_path()).read_text(encoding="utf-8")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("run_id"):
            found.append(row)
    return found


def wake_recorder(cloud: Cloud, run: Run) -> Callable[[float], None]:
    """What a kept run's explorer wake (`smi`, `exec`) does with its measured life once the
    explorer is stopped again: into the group's record and a ledger line (`cost`)."""

    def asleep(seconds: float) -> None:
        if seconds > 0:
            kept_record.add(cloud, run.resource_group, seconds)
            record_wake(cloud, run, seconds)

    return asleep
