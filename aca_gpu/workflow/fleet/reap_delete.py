"""Deleting many expired groups across subscriptions without tripping over ARM's throttling.

ARM throttles writes and deletes per subscription (a token bucket: 200, then 10 per second), so
work is split by subscription: each gets its own `concurrency` workers, and one subscription's
429s never slow another's. A throttled delete is sent again until accepted (teardown's patience;
the client's rate gate holds the subscription's other workers meanwhile), never given up. Accepted
deletes are then verified by one listing per subscription and round, not a read per group.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from aca_gpu.errors import AcaGpuError, NotFound
from aca_gpu.models import Cloud
from aca_gpu.naming import TAG_ENV, TAG_MANAGED, TAG_RUN_ID
from aca_gpu.workflow.base.threads import spawn, wait_for
from aca_gpu.workflow.env.run_queues import RunQueues, drop_run_queues, run_queues

REPORT_EVERY_S = 1.0
Key = tuple[str, str]


class ItemLike(Protocol):
    @property
    def subscription(self) -> str: ...

    @property
    def resource_group(self) -> str: ...


class CloudSource(Protocol):
    def __call__(self, subscription: str) -> Cloud: ...


def item_key(item: ItemLike) -> Key:
    return item.subscription.lower(), item.resource_group.lower()


class CachedClouds:
    """One Cloud per subscription, opened on first use (by `opener`) and shared by its workers."""

    def __init__(self, clouds: Mapping[str, Cloud] | None = None, opener: CloudSource | None = None) -> None:
        self._clouds = {k.lower(): v for k, v in (clouds or {}).items()}
        self._opener = opener
        self._lock = threading.Lock()

    def __call__(self, subscription: str) -> Cloud:
        with self._lock:
            cloud = self._clouds.get(subscription.lower())
            if cloud is None:
                if self._opener is None:
                    raise KeyError(subscription)
                cloud = self._opener(subscription)
                self._clouds[subscription.lower()] = cloud
            return cloud

    def opened(self) -> list[Cloud]:
        with self._lock:
            return list(self._clouds.values())


class Deleter:
    def __init__(
        self,
        clouds: CloudSource,
        *,
        concurrency: int,
        poll: float,
        report: Callable[[str], None],
        recheck: Callable[[Cloud, Any], Any] | None = None,
    ) -> None:
        self.clouds = clouds
        self.recheck = recheck  # the item again right before its delete: None to go ahead
        self.concurrency = max(1, concurrency)
        self.poll = poll
        self._report = report
        self._lock = threading.Lock()
        self._counts = {"accepted": 0, "deleted": 0, "failed": 0, "skipped": 0}
        self._total = 0
        self._reported_at = 0.0

    def run(self, doomed: Sequence[Any]) -> dict[Key, Any]:
        """Each doomed item with its final status (deleted | failed), by `item_key`."""
        self._total = len(doomed)
        by_sub: dict[str, list[Any]] = {}
        for item in doomed:
            by_sub.setdefault(item.subscription, []).append(item)
        futures = [spawn(partial(self._subscription, s, i), "acagpu-reap") for s, i in by_sub.items()]
        results: dict[Key, Any] = {}
        for future in futures:
            done: dict[Key, Any] = wait_for(future)
            results.update(done)
        return results

    def throttle_note(self) -> str:
        opened = self.clouds.opened() if isinstance(self.clouds, CachedClouds) else []
        limits = [getattr(c, "rate_limits", lambda: None)() for c in opened]
        refused = sum(lim.throttled for lim in limits if lim is not None)
        held = sum(lim.held_s for lim in limits if lim is not None)
        return f"; ARM throttled {refused} request(s), {held:.0f}s held back" if refused else ""

    # ---- one subscription ----------------------------------------------------------------------
    def _subscription(self, subscription: str, items: list[Any]) -> dict[Key, Any]:
        results: dict[Key, Any] = {}
        try:
            cloud = self.clouds(subscription)
        except AcaGpuError as exc:
            for item in items:
                results[item_key(item)] = replace(item, status="failed", error=exc.message)
            self._count("failed", len(items))
            return results
        work: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for item in items:
            work.put(item)
        accepted: list[Any] = []

        def worker() -> None:
            while True:
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                outcome = self._accept(cloud, item)
                with self._lock:
                    if outcome.status == "pending":
                        accepted.append(outcome)
                    else:
                        results[item_key(item)] = outcome
                self._count("accepted" if outcome.status == "pending" else outcome.status)

        workers = [spawn(worker, "acagpu-reap-worker") for _ in range(min(self.concurrency, len(items)))]
        for future in workers:
            wait_for(future)
        results.update(self._verify(cloud, accepted))
        return results

    def _accept(self, cloud: Cloud, item: Any) -> Any:
        """The one teardown path (billing first); `pending` once ARM accepted the group's delete. A
        queue run's role assignments and queues (in its environment's account) go after its group
        (env/run_queues.py: each checked as the run's); one left makes the item failed."""
        # here, not at the top: `status` uses CachedClouds and need not load the teardown engine
        from aca_gpu.workflow.engine import teardown
        from aca_gpu.workflow.spend import ledger

        try:
            changed = self.recheck(cloud, item) if self.recheck is not None else None
            if changed is not None:
                return changed
            if getattr(item, "served", False):  # its spend to the ledger before it goes
                ledger.record_served_group(cloud, item.resource_group)
            queues = self._queues_of(cloud, item)
            result = teardown.teardown_group(cloud, item.resource_group, wait_gone=False, poll=self.poll)
            left = drop_run_queues(cloud, queues) if queues is not None and result.clean else []
        except AcaGpuError as exc:
            return replace(item, status="failed", error=exc.message)
        if left:
            return replace(item, status="failed", error=f"its queues were not all deleted: {'; '.join(left)}")
        if result.verified:  # already absent
            return replace(item, status="deleted")
        if result.status == "deleting":
            return replace(item, status="pending")
        return replace(item, status="failed", error=result.message or "delete not accepted")

    @staticmethod
    def _queues_of(cloud: Cloud, item: Any) -> RunQueues | None:
        """A queue run's queues, read before its group (and the job naming them) goes."""
        env, run_id = getattr(item, "env", None), getattr(item, "run_id", None)
        if not env or not run_id:
            return None
        try:
            return run_queues(cloud, item.resource_group, {TAG_ENV: env, TAG_RUN_ID: run_id})
        except NotFound:  # its environment is gone, and its account with the queues in it
            return None

    def _verify(self, cloud: Cloud, accepted: list[Any]) -> dict[Key, Any]:
        """Read the subscription's managed groups each round until every accepted delete is gone."""
        from aca_gpu.workflow.engine import teardown

        waiting = {item.resource_group.lower(): item for item in accepted}
        results: dict[Key, Any] = {}
        end = time.monotonic() + teardown.GONE_DEADLINE_S
        while waiting:
            try:
                present = {g.name.lower() for g in cloud.list_resource_groups(TAG_MANAGED, "true")}
            except AcaGpuError:
                present = None  # one failed read says nothing: keep waiting
            if present is not None:
                for name in [n for n in waiting if n not in present]:
                    gone = waiting.pop(name)
                    results[item_key(gone)] = replace(gone, status="deleted")
                    self._count("deleted")
            if not waiting or time.monotonic() >= end:
                break
            time.sleep(self.poll)
        for item in waiting.values():
            error = (
                f"resource group {item.resource_group} still exists "
                f"{teardown.GONE_DEADLINE_S:.0f}s after its delete was accepted"
            )
            results[item_key(item)] = replace(item, status="failed", error=error)
            self._count("failed")
        return results

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self._counts[what] += n
            now = time.monotonic()
            due = now - self._reported_at >= REPORT_EVERY_S or self._finished()
            if due:
                self._reported_at = now
                c = dict(self._counts)
        if due:
            self._report(f"{c['accepted']}/{self._total} accepted, {c['deleted']} gone, {c['failed']} failed")

    def _finished(self) -> bool:
        return self._counts["deleted"] + self._counts["failed"] + self._counts["skipped"] >= self._total
