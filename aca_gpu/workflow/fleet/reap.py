"""The janitor: find expired acagpu resource groups and (only with --yes) delete them.

Dry-run by default, because a scheduled job that deletes on its first run surprises people.
Only groups tagged `acagpu:managed=true` are even considered; `acagpu:keep=true` and `--exclude`
patterns are always skipped. Deletions run in parallel with a bound per subscription and are
verified gone (reap_delete.py); across subscriptions the groups come from one Resource Graph query.
`plan` is the one place that decides which groups reap touches.
"""

from __future__ import annotations

import fnmatch
import queue
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from aca_gpu.config import Settings
from aca_gpu.errors import AcaGpuError, TeardownIncomplete
from aca_gpu.models import Cloud, ResourceGroupInfo
from aca_gpu.naming import (
    KIND_ENV,
    TAG_CREATED_AT,
    TAG_ENV,
    TAG_EXPIRES_AT,
    TAG_KEEP,
    TAG_KIND,
    TAG_MANAGED,
    TAG_RUN_ID,
    TAG_SERVED,
    is_managed,
    parse_iso_utc,
)
from aca_gpu.output import NullProgress, Progress
from aca_gpu.units import usd_text
from aca_gpu.workflow.base.threads import spawn, wait_for
from aca_gpu.workflow.env.find import runs_inside
from aca_gpu.workflow.fleet.groups import Scope, cloud_source, find_groups
from aca_gpu.workflow.fleet.reap_delete import CachedClouds, CloudSource, Deleter, item_key
from aca_gpu.workflow.spend import RunSpend
from aca_gpu.workflow.spend.so_far import UNCOUNTED

# What a group has cost so far, read from its own subscription: `spend.run_spend` via `group_spend`
SpendFn = Callable[[Cloud, ResourceGroupInfo, datetime], RunSpend | None]
PRICE_READERS = 8  # groups priced at once: a few reads each, all before the first delete
DELETING = "deleting"  # a group's provisioningState once ARM accepted its delete (any case)
SPEND_NOTE = "est. spend: list-price estimate from replica lifetimes so far, as `acagpu status` shows"
FLOOR_NOTE = "est. spend ending in +: at least this much; " + UNCOUNTED


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
    uncounted: str | None = None  # what spend_usd leaves out (spend.UNCOUNTED), as `status` says it
    served: bool = False  # a served app's run: its spend goes to the ledger as it is deleted
    env: str | None = None  # a run inside a warm environment: where a queue run's queues are

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
            "uncounted": self.uncounted,
            "error": self.error,
        }


@dataclass(frozen=True)
class ReapReport:
    dry_run: bool
    items: tuple[ReapItem, ...] = field(default_factory=tuple)
    prices: str | None = None  # the price table every spend figure came from (PriceTable.label)

    def by_status(self, status: str) -> list[ReapItem]:
        return [i for i in self.items if i.status == status]

    def as_dict(self) -> dict[str, Any]:
        counts = {s: len(self.by_status(s)) for s in ("would-delete", "deleted", "skipped", "failed")}
        summed = [i for i in self.items if i.action == "delete" and i.spend_usd is not None]
        spend = [i.spend_usd for i in summed if i.spend_usd is not None]
        return {
            "schema": 1,
            "kind": "reap",
            "dry_run": self.dry_run,
            "counts": counts,
            "spend_usd_estimate": round(sum(spend), 4) if spend else None,
            # the total is a floor when any figure in it is
            "uncounted": next((i.uncounted for i in summed if i.uncounted), None),
            "prices": self.prices,
            "items": [i.as_dict() for i in self.items],
        }


def decide(
    group: ResourceGroupInfo,
    subscription: str,
    *,
    now: datetime,
    older_than: timedelta | None,
    excludes: Sequence[str] = (),
) -> ReapItem:
    """Why this group would be deleted or skipped; pure, so every rule is tested on its own."""
    tags = dict(group.tags or {})
    created = parse_iso_utc(tags.get(TAG_CREATED_AT, ""))
    age = (now - created).total_seconds() if created else None

    def item(action: str, reason: str) -> ReapItem:
        status = "skipped" if action == "skip" else "pending"
        kind = KIND_ENV if tags.get(TAG_KIND) == KIND_ENV else "run"
        return ReapItem(
            subscription, group.name, tags.get(TAG_RUN_ID), action, reason, age, None, status, kind=kind,
            served=bool(tags.get(TAG_SERVED)), env=tags.get(TAG_ENV) if kind == "run" else None,
        )  # fmt: skip

    if not is_managed(tags):
        return item("skip", f"not tagged {TAG_MANAGED}=true")
    if (group.provisioning_state or "").lower() == DELETING:  # its delete was accepted: not sent again
        return item("skip", "being deleted (provisioningState Deleting)")
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


def plan(
    groups: Iterable[tuple[str, ResourceGroupInfo]],
    *,
    now: datetime,
    older_than: timedelta | None,
    excludes: Sequence[str] = (),
) -> list[ReapItem]:
    """Every (subscription, group) found, decided: the one place that chooses what reap touches."""
    return [decide(group, sub, now=now, older_than=older_than, excludes=excludes) for sub, group in groups]


def priced(
    items: Sequence[ReapItem],
    groups: Sequence[tuple[str, ResourceGroupInfo]],
    source: CloudSource,
    spend: SpendFn,
    now: datetime,
) -> tuple[list[ReapItem], str | None]:
    """Each acagpu run's spend so far (warm environments and strangers' groups are not runs), read a
    few groups at a time (daemon threads, like the deletes: Ctrl-C is not held by a hung read), and
    the price table the figures came from. A group that cannot be priced has no figure."""
    by_name = {(sub, group.name): group for sub, group in groups}
    found: list[RunSpend | None] = [None] * len(items)
    work: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(items)):
        work.put(index)

    def worker() -> None:
        while True:
            try:
                index = work.get_nowait()
            except queue.Empty:
                return
            item = items[index]
            group = by_name.get((item.subscription, item.resource_group))
            if group is None or item.kind != "run" or not is_managed(dict(group.tags)):
                continue
            try:
                found[index] = spend(source(item.subscription), group, now)
            except AcaGpuError:  # its subscription cannot be opened: the delete will say why
                continue

    for future in [spawn(worker, "acagpu-reap-spend") for _ in range(min(PRICE_READERS, len(items)))]:
        wait_for(future)
    tables = sorted({s.table for s in found if s is not None and s.table})
    out = [
        replace(i, spend_usd=s.usd if s else None, uncounted=s.uncounted if s else None)
        for i, s in zip(items, found, strict=True)
    ]
    return out, "; ".join(tables) or None


def listed_groups(clouds: Mapping[str, Cloud]) -> Iterator[tuple[str, ResourceGroupInfo]]:
    """acagpu's groups, one ARM listing per subscription (what a single subscription uses)."""
    for subscription, cloud in clouds.items():
        for group in cloud.list_resource_groups(TAG_MANAGED, "true"):
            yield subscription, group


def reap(
    clouds: Mapping[str, Cloud] | CloudSource,
    *,
    delete: bool,
    found: Iterable[tuple[str, ResourceGroupInfo]] | None = None,
    older_than: timedelta | None = None,
    excludes: Sequence[str] = (),
    concurrency: int = 4,
    now: datetime | None = None,
    spend: SpendFn | None = None,
    progress: Progress | None = None,
    poll: float = 5.0,
) -> ReapReport:
    """Plan across every subscription, then delete the expired groups when `delete` is set.

    `found` is what a Resource Graph query returned (all subscriptions at once); without it each
    subscription in `clouds` is listed. Deletes run `concurrency` at a time *per subscription*
    (ARM throttles each subscription on its own), then one listing per subscription and round
    verifies them gone, instead of a read per group."""
    progress = progress or NullProgress()
    now = now or datetime.now(UTC)
    source = clouds if callable(clouds) else CachedClouds(dict(clouds))
    with progress.step("find acagpu resource groups") as step:
        if found is None:
            if callable(clouds):
                raise ValueError("a cloud source needs the groups found (Resource Graph)")
            found = listed_groups(clouds)
        found = list(found)
        items = plan(found, now=now, older_than=older_than, excludes=excludes)
        prices = None
        if spend is not None:
            items, prices = priced(items, found, source, spend, now)
        names = {group.name: group.tags.get(TAG_ENV) for _, group in found}
        items = [_unless_busy(source(i.subscription), i, names.get(i.resource_group)) for i in items]
        doomed = [i for i in items if i.action == "delete"]
        subs = len({i.subscription for i in items})
        step.update(f"{len(items)} found in {subs} subscription(s), {len(doomed)} expired")
    if not delete:
        items = [replace(i, status="would-delete") if i.action == "delete" else i for i in items]
        return ReapReport(dry_run=True, items=tuple(items), prices=prices)

    def recheck(cloud: Cloud, item: ReapItem) -> ReapItem | None:
        """A warm environment is read again right before its delete: a run may have begun since the
        plan. None: go ahead; else the item as skipped."""
        if item.kind != KIND_ENV:
            return None
        group = cloud.get_resource_group(item.resource_group)
        if group is None:
            return replace(item, action="skip", status="skipped", reason="already gone")
        again = _unless_busy(
            cloud,
            decide(group, item.subscription, now=datetime.now(UTC), older_than=older_than),
            group.tags.get(TAG_ENV),
        )
        if again.action != "delete":
            return replace(again, status="skipped", reason=f"re-checked before delete: {again.reason}")
        return None

    with progress.step(f"delete {len(doomed)} resource group(s)") as step:
        deleter = Deleter(source, concurrency=concurrency, poll=poll, report=step.update, recheck=recheck)
        done = deleter.run(doomed)
        failed = sum(1 for r in done.values() if r.status == "failed")
        step.update(f"{len(doomed) - failed} deleted, {failed} failed{deleter.throttle_note()}")
    final = tuple(done.get(item_key(i), i) for i in items)
    return ReapReport(dry_run=False, items=final, prices=prices)


def group_spend(cloud: Cloud, group: ResourceGroupInfo, now: datetime) -> RunSpend | None:
    """A run's spend so far by `spend.run_spend`, the function `status` shows it with, so one group
    has one figure; a group whose tag names no known GPU has none (and costs no read)."""
    from aca_gpu.workflow.base.context import run_from_group
    from aca_gpu.workflow.spend import run_spend, tagged_profile

    if tagged_profile(group.tags) is None:
        return None
    return run_spend(cloud, run_from_group(group), now)  # a failed read is an unknown figure


def run(
    settings: Settings,
    scope: Scope,
    *,
    delete: bool,
    older_than: timedelta | None = None,
    excludes: Sequence[str] = (),
    concurrency: int = 4,
    progress: Progress | None = None,
) -> ReapReport:
    """Reap one subscription (an ARM listing) or many (one Resource Graph query for all of them)."""
    options: dict[str, Any] = {
        "delete": delete,
        "older_than": older_than,
        "excludes": excludes,
        "concurrency": concurrency,
        "spend": group_spend,
        "progress": progress,
        "poll": settings.polling_interval,
    }
    if scope.uses_graph:
        found = [(g.subscription, g.group) for g in find_groups(settings, scope)]
        return reap(cloud_source(settings), found=found, **options)
    from aca_gpu.workflow.base.context import open_cloud

    sub = scope.subscriptions[0] if scope.subscriptions else None
    cloud = open_cloud(settings.with_overrides(subscription=sub))
    return reap({cloud.subscription_id: cloud}, **options)


def _spend_text(item: ReapItem) -> str:
    """The figure as `status` prints it: `+` after it when it leaves something out (a floor)."""
    return usd_text(item.spend_usd) + ("+" if item.uncounted else "")


def render_text(report: ReapReport, *, subscriptions: bool = False) -> str:
    """One line a group; with `subscriptions` (a sweep of several) under a heading a subscription
    that names it whole, as `status` and `cost` do."""
    verb = "would delete" if report.dry_run else "deleted"
    lines = []
    sections: dict[str, list[ReapItem]] = {}
    for item in report.items:
        sections.setdefault(item.subscription if subscriptions else "", []).append(item)
    for subscription, items in sections.items():
        if subscription:
            lines.append(f"subscription {subscription}")
        for item in items:
            spend = f"  ~{_spend_text(item)}" if item.spend_usd is not None else ""
            lines.append(f"{item.status:<13} {item.resource_group:<28} {item.reason}{spend}")
            if item.error:
                lines.append(f"{'':<13} error: {item.error}")
    counts = report.as_dict()["counts"]
    doomed = counts["would-delete"] if report.dry_run else counts["deleted"]
    lines.append(f"{verb}: {doomed}, skipped: {counts['skipped']}, failed: {counts['failed']}")
    if any(item.uncounted for item in report.items):
        lines.append(FLOOR_NOTE)
    if report.prices:
        lines.append(f"{SPEND_NOTE} ({report.prices})")
    if report.dry_run and doomed:
        lines.append("dry run: nothing was deleted; re-run with --yes to delete")
    return "\n".join(lines)


def render_markdown(report: ReapReport) -> str:
    title = "## acagpu reap (dry run)" if report.dry_run else "## acagpu reap"
    rows = [title, "", "| resource group | status | reason | est. spend |", "|---|---|---|---|"]
    for item in report.items:
        spend = _spend_text(item) if item.spend_usd is not None else "–"
        reason = item.reason + (f" ({item.error})" if item.error else "")
        rows.append(f"| `{item.resource_group}` | {item.status} | {reason} | {spend} |")
    if not report.items:
        rows.append("| – | nothing found | | |")
    if any(item.uncounted for item in report.items):
        rows += ["", FLOOR_NOTE]
    if report.prices:
        rows += ["", f"{SPEND_NOTE} ({report.prices})"]
    return "\n".join(rows) + "\n"


def raise_for_failures(report: ReapReport) -> None:
    failed = report.by_status("failed")
    if failed:
        names = ", ".join(f"{i.resource_group} ({i.error})" for i in failed)
        raise TeardownIncomplete(f"could not delete {len(failed)} resource group(s): {names}")
