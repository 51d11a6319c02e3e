"""The janitor: find expired acagpu resource groups and (only with --yes) delete them.

Dry-run by default, because a scheduled job that deletes on its first run surprises people.
Only groups tagged `acagpu:managed=true` are even considered; `acagpu:keep=true` and `--exclude`
patterns are always skipped. Deletions run in parallel with a bound, and each is verified gone.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from aca_gpu.config import Settings
from aca_gpu.errors import AcaGpuError, TeardownIncomplete
from aca_gpu.models import Cloud, ResourceGroupInfo
from aca_gpu.naming import (
    KIND_ENV,
    TAG_CREATED_AT,
    TAG_ENV,
    TAG_EXPIRES_AT,
    TAG_GPU,
    TAG_KEEP,
    TAG_KIND,
    TAG_MANAGED,
    TAG_RUN_ID,
    is_managed,
    parse_iso_utc,
)
from aca_gpu.output import NullProgress, Progress
from aca_gpu.workflow.envs import runs_inside
from aca_gpu.workflow.teardown import teardown_group
from aca_gpu.workflow.threads import spawn, wait_for

SpendFn = Callable[[str | None, float], float | None]


@dataclass(frozen=True)
class ReapItem:
    subscription: str
    resource_group: str
    run_id: str | None
    action: str  # delete | skip
    reason: str
    age_s: float | None
    spend_usd: float | None
    status: str = "pending"  # would-delete | deleted | skipped | failed
    error: str | None = None
    kind: str = "run"  # run | env (a warm environment)

    def as_dict(self) -> dict[str, Any]:
        return {
            "subscription": self.subscription,
            "resource_group": self.resource_group,
            "run_id": self.run_id,
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "age_seconds": None if self.age_s is None else round(self.age_s),
            "spend_usd_estimate": self.spend_usd,
            "error": self.error,
        }


@dataclass(frozen=True)
class ReapReport:
    dry_run: bool
    items: tuple[ReapItem, ...] = field(default_factory=tuple)

    def by_status(self, status: str) -> list[ReapItem]:
        return [i for i in self.items if i.status == status]

    def as_dict(self) -> dict[str, Any]:
        counts = {s: len(self.by_status(s)) for s in ("would-delete", "deleted", "skipped", "failed")}
        spend = [i.spend_usd for i in self.items if i.action == "delete" and i.spend_usd is not None]
        return {
            "schema": 1,
            "kind": "reap",
            "dry_run": self.dry_run,
            "counts": counts,
            "spend_usd_estimate": round(sum(spend), 2) if spend else None,
            "items": [i.as_dict() for i in self.items],
        }


def decide(
    group: ResourceGroupInfo,
    subscription: str,
    *,
    now: datetime,
    older_than: timedelta | None,
    excludes: Sequence[str] = (),
    spend: SpendFn | None = None,
) -> ReapItem:
    """Why this group would be deleted or skipped; pure, so every rule is tested on its own."""
    tags = dict(group.tags or {})
    created = parse_iso_utc(tags.get(TAG_CREATED_AT, ""))
    age = (now - created).total_seconds() if created else None
    cost = spend(tags.get(TAG_GPU), age) if spend and age is not None else None

    def item(action: str, reason: str) -> ReapItem:
        status = "skipped" if action == "skip" else "pending"
        kind = KIND_ENV if tags.get(TAG_KIND) == KIND_ENV else "run"
        return ReapItem(
            subscription, group.name, tags.get(TAG_RUN_ID), action, reason, age, cost, status, kind=kind
        )

    if not is_managed(tags):
        return item("skip", f"not tagged {TAG_MANAGED}=true")
    if tags.get(TAG_KEEP, "").lower() == "true":
        return item("skip", f"tagged {TAG_KEEP}=true")
    for pattern in excludes:
        if fnmatch.fnmatchcase(group.name, pattern):
            return item("skip", f"excluded by pattern {pattern!r}")
    expires = parse_iso_utc(tags.get(TAG_EXPIRES_AT, ""))
    if tags.get(TAG_KIND) == KIND_ENV:  # a warm environment: its expiry is renewed by every run
        if expires is not None and expires <= now:
            return item("delete", f"warm environment idle past its TTL (expired at {tags[TAG_EXPIRES_AT]})")
        if expires is not None:
            return item(
                "skip", f"warm environment in use or idle within its TTL (expires {tags[TAG_EXPIRES_AT]})"
            )
        return item("skip", "warm environment without an expiry tag")
    if expires is not None and expires <= now:
        return item("delete", f"expired at {tags[TAG_EXPIRES_AT]}")
    if older_than is not None and created is not None and now - created >= older_than:
        return item("delete", f"created {tags[TAG_CREATED_AT]}, older than {_human(older_than)}")
    if expires is not None:
        return item("skip", f"not expired (expires {tags[TAG_EXPIRES_AT]})")
    return item("skip", "no expiry tag (use --older-than to include it)")


def _unless_busy(cloud: Cloud, item: ReapItem, env_name: str | None = None) -> ReapItem:
    """A warm environment with a run inside is never removed, expired or not (the run renews it)."""
    if item.action != "delete" or item.kind != KIND_ENV:
        return item
    try:
        name = env_name or item.resource_group.removeprefix("rg-acagpu-env-")
        runs = runs_inside(cloud, item.resource_group, name)
    except AcaGpuError as exc:  # cannot tell whether a run is inside: leave it
        return replace(item, action="skip", status="skipped", reason=f"cannot list its runs: {exc.message}")
    if runs:
        return replace(
            item,
            action="skip",
            status="skipped",
            reason=f"warm environment with a run inside: {', '.join(sorted(runs))}",
        )
    return item


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def reap(
    clouds: Mapping[str, Cloud],
    *,
    delete: bool,
    older_than: timedelta | None = None,
    excludes: Sequence[str] = (),
    concurrency: int = 4,
    now: datetime | None = None,
    spend: SpendFn | None = None,
    progress: Progress | None = None,
    poll: float = 5.0,
) -> ReapReport:
    """Plan across every subscription, then delete the expired groups when `delete` is set."""
    progress = progress or NullProgress()
    now = now or datetime.now(UTC)
    items: list[ReapItem] = []
    with progress.step("find acagpu resource groups") as step:
        groups_seen: dict[int, list[ResourceGroupInfo]] = {}
        for subscription, cloud in clouds.items():
            groups_seen[id(cloud)] = cloud.list_resource_groups(TAG_MANAGED, "true")
            for group in groups_seen[id(cloud)]:
                items.append(
                    decide(
                        group, subscription, now=now, older_than=older_than, excludes=excludes, spend=spend
                    )
                )
        names = {g.name: g.tags.get(TAG_ENV) for c in clouds.values() for g in groups_seen.get(id(c), [])}
        items = [_unless_busy(clouds[i.subscription], i, names.get(i.resource_group)) for i in items]
        doomed = [i for i in items if i.action == "delete"]
        step.update(f"{len(items)} found, {len(doomed)} expired")
    if not delete:
        items = [replace(i, status="would-delete") if i.action == "delete" else i for i in items]
        return ReapReport(dry_run=True, items=tuple(items))

    def remove(item: ReapItem) -> ReapItem:
        """The one teardown path (billing first), verified gone; a failure is reported, not raised."""
        cloud = clouds[item.subscription]
        try:
            if item.kind == KIND_ENV:  # a run may have begun since the plan: read tags and runs again
                group = cloud.get_resource_group(item.resource_group)
                if group is None:
                    return replace(item, action="skip", status="skipped", reason="already gone")
                again = _unless_busy(
                    cloud,
                    decide(group, item.subscription, now=datetime.now(UTC), older_than=older_than),
                    group.tags.get(TAG_ENV),
                )
                if again.action != "delete":
                    return replace(
                        again, status="skipped", reason=f"re-checked before delete: {again.reason}"
                    )
            result = teardown_group(cloud, item.resource_group, wait_gone=True, poll=poll)
        except AcaGpuError as exc:
            return replace(item, status="failed", error=exc.message)
        if not result.verified:
            return replace(item, status="failed", error=result.message or "still present after deletion")
        return replace(item, status="deleted")

    with progress.step(f"delete {len(doomed)} resource group(s)") as step:
        done = {id(i): r for i, r in zip(doomed, _bounded(remove, doomed, concurrency), strict=True)}
        failed = sum(1 for r in done.values() if r.status == "failed")
        step.update(f"{len(doomed) - failed} deleted, {failed} failed")
    final = tuple(done.get(id(i), i) for i in items)
    return ReapReport(dry_run=False, items=final)


def _bounded(call: Callable[[ReapItem], ReapItem], items: Sequence[ReapItem], limit: int) -> list[ReapItem]:
    """`call` over items, at most `limit` at once, in daemon threads so Ctrl-C is never held up."""
    results: list[ReapItem] = []
    for start in range(0, len(items), max(1, limit)):
        batch = [spawn(partial(call, i), "acagpu-reap") for i in items[start : start + max(1, limit)]]
        results.extend(wait_for(f) for f in batch)
    return results


def spend_estimate(gpu: str | None, seconds: float) -> float | None:
    """The group's whole life priced by `cost.run_spend` (the figure `status` shows): on a dedicated
    profile that is the node's time, which bills replicas or not; on a serverless one an upper bound,
    as if one GPU replica had run all along."""
    if not gpu:
        return None
    from aca_gpu import cost

    try:
        return round(cost.run_spend(gpu, seconds).usd, 2)
    except AcaGpuError:
        return None


def run(
    settings_list: Sequence[Settings],
    *,
    delete: bool,
    older_than: timedelta | None = None,
    excludes: Sequence[str] = (),
    concurrency: int = 4,
    progress: Progress | None = None,
) -> ReapReport:
    """Open one cloud per subscription and reap them all."""
    from aca_gpu.workflow.context import open_cloud

    clouds: dict[str, Cloud] = {}
    for settings in settings_list:
        cloud = open_cloud(settings)
        clouds[cloud.subscription_id] = cloud
    return reap(
        clouds,
        delete=delete,
        older_than=older_than,
        excludes=excludes,
        concurrency=concurrency,
        spend=spend_estimate,
        progress=progress,
        poll=min(s.polling_interval for s in settings_list) if settings_list else 5.0,
    )


def render_text(report: ReapReport) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    lines = []
    for item in report.items:
        spend = f"  ~${item.spend_usd:.2f}" if item.spend_usd is not None else ""
        lines.append(f"{item.status:<13} {item.resource_group:<28} {item.reason}{spend}")
        if item.error:
            lines.append(f"{'':<13} error: {item.error}")
    counts = report.as_dict()["counts"]
    doomed = counts["would-delete"] if report.dry_run else counts["deleted"]
    lines.append(f"{verb}: {doomed}, skipped: {counts['skipped']}, failed: {counts['failed']}")
    if report.dry_run and doomed:
        lines.append("dry run: nothing was deleted; re-run with --yes to delete")
    return "\n".join(lines)


def render_markdown(report: ReapReport) -> str:
    title = "## acagpu reap (dry run)" if report.dry_run else "## acagpu reap"
    rows = [title, "", "| resource group | status | reason | est. spend |", "|---|---|---|---|"]
    for item in report.items:
        spend = f"${item.spend_usd:.2f}" if item.spend_usd is not None else "–"
        reason = item.reason + (f" ({item.error})" if item.error else "")
        rows.append(f"| `{item.resource_group}` | {item.status} | {reason} | {spend} |")
    if not report.items:
        rows.append("| – | nothing found | | |")
    return "\n".join(rows) + "\n"


def raise_for_failures(report: ReapReport) -> None:
    failed = report.by_status("failed")
    if failed:
        names = ", ".join(f"{i.resource_group} ({i.error})" for i in failed)
        raise TeardownIncomplete(f"could not delete {len(failed)} resource group(s): {names}")
