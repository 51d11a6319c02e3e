from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import create_autospec

import pytest

from aca_gpu import cost
from aca_gpu.errors import CloudError, TeardownIncomplete
from aca_gpu.models import Cloud, ResourceGroupInfo
from aca_gpu.naming import iso_utc, run_tags
from aca_gpu.workflow.engine import teardown
from aca_gpu.workflow.fleet import reap as reap_flow
from aca_gpu.workflow.spend import RunSpend

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def _rg(name: str, tags: dict[str, str]) -> ResourceGroupInfo:
    return ResourceGroupInfo(name=name, location="eastus", tags=tags)


def _run(run_id: str, *, age: timedelta, ttl: timedelta, keep: bool = False) -> ResourceGroupInfo:
    tags = run_tags(run_id, owner="me", ttl=ttl, now=NOW - age, keep=keep, gpu="t4")
    return _rg(f"rg-acagpu-{run_id}", tags)


@pytest.mark.parametrize(
    ("group", "older_than", "excludes", "action", "reason_part"),
    [
        (_run("a1", age=timedelta(hours=3), ttl=timedelta(hours=2)), None, (), "delete", "expired"),
        (_run("a2", age=timedelta(hours=1), ttl=timedelta(hours=2)), None, (), "skip", "not expired"),
        (_run("a3", age=timedelta(hours=3), ttl=timedelta(hours=2), keep=True), None, (), "skip", "keep"),
        (
            _run("a4", age=timedelta(hours=3), ttl=timedelta(hours=2)),
            None,
            ("rg-acagpu-a*",),
            "skip",
            "excluded",
        ),
        (_rg("rg-other", {"env": "prod"}), None, (), "skip", "not tagged"),
        (_rg("rg-fake", {"acagpu:managed": "false"}), None, (), "skip", "not tagged"),
        (
            _rg(
                "rg-acagpu-old",
                {"acagpu:managed": "true", "acagpu:created-at": iso_utc(NOW - timedelta(days=2))},
            ),
            timedelta(days=1),
            (),
            "delete",
            "older than 1d",
        ),
        (
            _rg(
                "rg-acagpu-old",
                {"acagpu:managed": "true", "acagpu:created-at": iso_utc(NOW - timedelta(days=2))},
            ),
            None,
            (),
            "skip",
            "no expiry",
        ),
        (  # exactly at the expiry instant counts as expired
            _run("a5", age=timedelta(hours=2), ttl=timedelta(hours=2)),
            None,
            (),
            "delete",
            "expired",
        ),
    ],
)
def test_decide_rules(
    group: ResourceGroupInfo,
    older_than: timedelta | None,
    excludes: tuple[str, ...],
    action: str,
    reason_part: str,
) -> None:
    item = reap_flow.decide(group, "sub", now=NOW, older_than=older_than, excludes=excludes)
    assert item.action == action
    assert reason_part in item.reason


def _cloud(groups: list[ResourceGroupInfo]) -> Cloud:
    """A Cloud autospec whose groups exist until their delete is accepted."""
    cloud = create_autospec(Cloud, instance=True)
    alive = {g.name: g for g in groups}
    cloud.list_resource_groups.side_effect = lambda *a, **k: [g for g in groups if g.name in alive]
    cloud.get_resource_group.side_effect = alive.get
    cloud.delete_resource_group.side_effect = lambda name, wait=True: alive.pop(name, None) and None
    cloud.list_apps.return_value = []
    cloud.list_jobs.return_value = []
    return cloud  # type: ignore[no-any-return]


def test_dry_run_deletes_nothing() -> None:
    cloud = _cloud([_run("x1", age=timedelta(hours=5), ttl=timedelta(hours=1))])
    report = reap_flow.reap({"sub": cloud}, delete=False, now=NOW)
    assert report.dry_run
    assert [i.status for i in report.items] == ["would-delete"]
    cloud.delete_resource_group.assert_not_called()  # type: ignore[attr-defined]
    cloud.list_resource_groups.assert_called_once_with("acagpu:managed", "true")  # type: ignore[attr-defined]


def test_delete_only_expired_and_verify() -> None:
    expired = _run("x1", age=timedelta(hours=5), ttl=timedelta(hours=1))
    fresh = _run("x2", age=timedelta(minutes=5), ttl=timedelta(hours=1))
    stranger = _rg("rg-stranger", {"acagpu:managed": "nope"})
    cloud = _cloud([expired, fresh, stranger])
    spent = RunSpend("stopped", 0.0, None, cost.run_spend("t4", 3600.0), "replica lifetimes")
    report = reap_flow.reap({"sub": cloud}, delete=True, now=NOW, spend=lambda *_: spent, poll=0.01)
    cloud.delete_resource_group.assert_called_once_with("rg-acagpu-x1", wait=False)  # type: ignore[attr-defined]
    statuses = {i.resource_group: i.status for i in report.items}
    assert statuses == {"rg-acagpu-x1": "deleted", "rg-acagpu-x2": "skipped", "rg-stranger": "skipped"}
    assert report.as_dict()["spend_usd_estimate"] == round(cost.run_spend("t4", 3600.0).usd, 4)
    reap_flow.raise_for_failures(report)  # nothing failed: no exception


def test_throttling_is_retried_then_failure_is_reported() -> None:
    cloud = _cloud([_run("t1", age=timedelta(hours=5), ttl=timedelta(hours=1))])
    throttle = CloudError("throttled", code="TooManyRequests")
    accept = cloud.delete_resource_group.side_effect  # type: ignore[attr-defined]
    answers = iter([throttle, None])

    def flaky(name: str, wait: bool = True) -> None:
        answer = next(answers)
        if answer is not None:
            raise answer
        accept(name, wait)

    cloud.delete_resource_group.side_effect = flaky  # type: ignore[attr-defined]
    report = reap_flow.reap({"sub": cloud}, delete=True, now=NOW, poll=0.01)
    assert report.items[0].status == "deleted"
    assert cloud.delete_resource_group.call_count == 2  # type: ignore[attr-defined]

    cloud = _cloud([_run("t2", age=timedelta(hours=5), ttl=timedelta(hours=1))])
    cloud.delete_resource_group.side_effect = CloudError("boom", code="InternalServerError")  # type: ignore[attr-defined]
    report = reap_flow.reap({"sub": cloud}, delete=True, now=NOW, poll=0.01)
    assert report.items[0].status == "failed"
    with pytest.raises(TeardownIncomplete):
        reap_flow.raise_for_failures(report)


def test_still_present_after_delete_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    group = _run("s1", age=timedelta(hours=5), ttl=timedelta(hours=1))
    cloud = _cloud([group])
    cloud.delete_resource_group.side_effect = None  # type: ignore[attr-defined]  # accepted, never gone
    monkeypatch.setattr(teardown, "GONE_DEADLINE_S", 0.1)
    report = reap_flow.reap({"sub": cloud}, delete=True, now=NOW, poll=0.01)
    assert report.items[0].status == "failed"
    assert "still exists" in (report.items[0].error or "")


def test_several_subscriptions() -> None:
    a = _cloud([_run("m1", age=timedelta(hours=5), ttl=timedelta(hours=1))])
    b = _cloud([_run("m2", age=timedelta(hours=5), ttl=timedelta(hours=1))])
    report = reap_flow.reap({"sub-a": a, "sub-b": b}, delete=True, now=NOW, concurrency=2, poll=0.01)
    assert sorted((i.subscription, i.status) for i in report.items) == [
        ("sub-a", "deleted"),
        ("sub-b", "deleted"),
    ]


def test_many_groups_per_subscription_in_bounded_parallel_and_throttling_never_gives_up() -> None:
    """Each subscription gets its own `concurrency` workers; a delete refused for its rate (429
    after azure-core's own retries) is sent again, far more often than a failure's three tries."""
    import threading
    import time as _time

    groups = {
        s: [_run(f"{s}{i}", age=timedelta(hours=5), ttl=timedelta(hours=1)) for i in range(12)] for s in "ab"
    }
    clouds = {s: _cloud(g) for s, g in groups.items()}
    in_flight = {s: 0 for s in groups}
    most = {s: 0 for s in groups}
    lock = threading.Lock()
    refusals = {"left": 8}

    def slow(sub: str, accept: Any) -> Any:
        def call(name: str, wait: bool = True) -> None:
            with lock:
                in_flight[sub] += 1
                most[sub] = max(most[sub], in_flight[sub])
                throttled = name.endswith("a3") and refusals["left"] > 0
                if throttled:
                    refusals["left"] -= 1
            try:
                _time.sleep(0.01)
                if throttled:
                    raise CloudError("throttled", code="SubscriptionRequestsThrottled")
                accept(name, wait)
            finally:
                with lock:
                    in_flight[sub] -= 1

        return call

    for sub, cloud in clouds.items():
        cloud.delete_resource_group.side_effect = slow(sub, cloud.delete_resource_group.side_effect)  # type: ignore[attr-defined]
    updates: list[str] = []

    class Recorder:
        def step(self, name: str) -> Any:
            from contextlib import nullcontext

            class Handle:
                def update(self, detail: str) -> None:
                    updates.append(detail)

            return nullcontext(Handle())

        def note(self, message: str) -> None:
            updates.append(message)

        def warn(self, message: str) -> None:
            updates.append(message)

    report = reap_flow.reap(clouds, delete=True, now=NOW, concurrency=3, poll=0.01, progress=Recorder())  # type: ignore[arg-type]
    assert report.as_dict()["counts"]["deleted"] == 24 and not report.by_status("failed")
    assert refusals["left"] == 0  # the throttled group was refused 8 times and still deleted
    assert most == {"a": 3, "b": 3}  # bounded per subscription, both subscriptions at once
    assert any(u.startswith("24/24 accepted") or "24 deleted" in u for u in updates)
