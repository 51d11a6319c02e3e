"""The guard script is standalone (stdlib only, shipped into a stock image), so it carries its own
copy of the reaper's rules: this keeps its decisions equal to `aca_gpu.workflow.fleet.reap.decide`."""

from __future__ import annotations

import ast
import importlib.util
import sys
from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest

from aca_gpu.errors import BadInput
from aca_gpu.models import ResourceGroupInfo
from aca_gpu.resources import template_path
from aca_gpu.workflow.fleet import reap
from aca_gpu.workflow.guard import manage as guard

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
PAST, FUTURE = "2026-11-23T11:00:00Z", "2026-11-23T13:00:00Z"
M = {"acagpu:managed": "true"}


def _script() -> ModuleType:
    path = template_path("guard", "acagpu_guard.py")
    spec = importlib.util.spec_from_file_location("acagpu_guard_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()

CASES = [
    ("untagged", {}, None, ()),
    ("deleting-expired", {**M, "acagpu:expires-at": PAST, "state": "Deleting"}, None, ()),
    ("deleting-env", {**M, "acagpu:kind": "env", "acagpu:expires-at": FUTURE, "state": "Deleting"}, None, ()),
    ("deleting-keep", {**M, "acagpu:keep": "true", "state": "deleting"}, None, ()),
    ("deleting-stranger", {"state": "Deleting"}, None, ()),
    ("succeeded-expired", {**M, "acagpu:expires-at": PAST, "state": "Succeeded"}, None, ()),
    ("managed-false", {"acagpu:managed": "false", "acagpu:expires-at": PAST}, None, ()),
    ("managed-True-case", {"acagpu:managed": "True", "acagpu:expires-at": PAST}, None, ()),
    ("expired", {**M, "acagpu:expires-at": PAST}, None, ()),
    ("expired-keep", {**M, "acagpu:expires-at": PAST, "acagpu:keep": "true"}, None, ()),
    ("expired-keep-caps", {**M, "acagpu:expires-at": PAST, "acagpu:keep": "TRUE"}, None, ()),
    ("expired-keep-false", {**M, "acagpu:expires-at": PAST, "acagpu:keep": "false"}, None, ()),
    ("not-expired", {**M, "acagpu:expires-at": FUTURE}, None, ()),
    ("expires-now", {**M, "acagpu:expires-at": "2026-11-23T12:00:00Z"}, None, ()),
    ("expiry-offset", {**M, "acagpu:expires-at": "2026-11-23T12:30:00+01:00"}, None, ()),
    ("expiry-naive", {**M, "acagpu:expires-at": "2026-11-23T11:59:00"}, None, ()),
    ("expiry-garbage", {**M, "acagpu:expires-at": "soon"}, None, ()),
    ("no-expiry", {**M, "acagpu:created-at": "2026-11-20T12:00:00Z"}, None, ()),
    ("no-expiry-old", {**M, "acagpu:created-at": "2026-11-20T12:00:00Z"}, timedelta(days=1), ()),
    ("no-expiry-young", {**M, "acagpu:created-at": "2026-11-23T11:30:00Z"}, timedelta(hours=1), ()),
    ("old-90m", {**M, "acagpu:created-at": "2026-11-23T10:00:00Z"}, timedelta(minutes=90), ()),
    ("old-odd", {**M, "acagpu:created-at": "2026-11-23T10:00:00Z"}, timedelta(seconds=61), ()),
    ("excluded", {**M, "acagpu:expires-at": PAST}, None, ("rg-acagpu-ex*",)),
    ("guard-own", {**M, "acagpu:keep": "true", "acagpu:role": "guard"}, None, ()),
    ("env-idle-expired", {**M, "acagpu:kind": "env", "acagpu:expires-at": PAST}, None, ()),
    ("env-within-ttl", {**M, "acagpu:kind": "env", "acagpu:expires-at": FUTURE}, None, ()),
    (
        "env-old-not-expired",
        {**M, "acagpu:kind": "env", "acagpu:expires-at": FUTURE, "acagpu:created-at": "2026-11-01T12:00:00Z"},
        timedelta(days=1),
        (),
    ),
    ("env-no-expiry", {**M, "acagpu:kind": "env"}, None, ()),
    ("env-keep", {**M, "acagpu:kind": "env", "acagpu:expires-at": PAST, "acagpu:keep": "true"}, None, ()),
]


@pytest.mark.parametrize(("name", "tags", "older_than", "excludes"), CASES, ids=[c[0] for c in CASES])
def test_script_decides_like_the_reaper(
    name: str, tags: dict[str, str], older_than: timedelta | None, excludes: tuple[str, ...]
) -> None:
    group = f"rg-acagpu-{name}"
    tags = dict(tags)
    state = tags.pop("state", None)  # the group's provisioningState, not a tag
    ours = reap.decide(
        ResourceGroupInfo(group, "westus3", tags, state),
        "sub",
        now=NOW,
        older_than=older_than,
        excludes=excludes,
    )
    theirs = SCRIPT.decide(group, tags, NOW, older_than, excludes, state)
    assert theirs == (ours.action, ours.reason)


def test_the_table_covers_both_outcomes() -> None:
    def action(case: tuple[str, dict[str, str], timedelta | None, tuple[str, ...]]) -> str:
        tags = dict(case[1])
        state = tags.pop("state", None)
        return str(SCRIPT.decide(f"rg-acagpu-{case[0]}", tags, NOW, case[2], case[3], state)[0])

    assert {action(c) for c in CASES} == {"delete", "skip"}


def test_a_group_being_deleted_is_said_so_and_not_deleted_again() -> None:
    """An environment whose delete was accepted (its group `Deleting`) is no environment idle
    within its TTL, and an expired run being deleted is not sent a second delete."""
    for tags in ({**M, "acagpu:kind": "env", "acagpu:expires-at": FUTURE}, {**M, "acagpu:expires-at": PAST}):
        item = reap.decide(
            ResourceGroupInfo("rg-acagpu-x", "eastus", tags, "Deleting"), "s", now=NOW, older_than=None
        )
        assert (item.action, item.reason) == ("skip", "being deleted (provisioningState Deleting)")


def test_the_script_imports_only_the_standard_library() -> None:
    tree = ast.parse(template_path("guard", "acagpu_guard.py").read_text(encoding="utf-8"))
    modules = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules


def test_summary_fits_a_tag_value() -> None:
    counts = {"deleted": 40, "would-delete": 0, "skipped": 2, "failed": 0}
    text = SCRIPT.summary_text(NOW, counts, [f"rg-acagpu-{i:09d}" for i in range(40)])
    assert len(text) <= 256 and text.startswith("2026-11-23T12:00:00Z deleted 40: rg-acagpu-000000000")
    assert text.endswith("; skipped 2; failed 0") and "…" in text


@pytest.mark.parametrize(
    ("every", "cron"),
    [("1m", "* * * * *"), ("15m", "*/15 * * * *"), ("60m", "7 */1 * * *"), ("6h", "7 */6 * * *"),
     ("1d", "7 3 * * *")],
)  # fmt: skip
def test_every_becomes_a_cron(every: str, cron: str) -> None:
    assert guard.every_to_cron(every) == cron


@pytest.mark.parametrize("every", ["7m", "90m", "5h", "2d", "30s", "0m", "soon"])
def test_periods_that_do_not_divide_an_hour_or_a_day_are_refused(every: str) -> None:
    with pytest.raises(BadInput):
        guard.every_to_cron(every)


def test_permission_rule_is_arms() -> None:
    owner = [{"actions": ["*"], "notActions": []}]
    contributor = [{"actions": ["*"], "notActions": ["Microsoft.Authorization/*/Write"]}]
    assert guard.allowed(owner, guard.ASSIGN)
    assert not guard.allowed(contributor, guard.ASSIGN)
    assert guard.allowed(contributor, "Microsoft.App/jobs/write")
    assert not guard.allowed([], guard.ASSIGN)


SPANS = [
    ("2026-11-22T11:00:00Z", "2026-11-22T11:01:30Z"),  # ended: its whole life
    ("2026-11-22T11:59:00Z", None),  # running: until now
    (None, None),  # never started: nothing
    ("2026-11-22T12:00:05Z", None),  # a clock ahead of this one: never negative
    ("2026-11-22T11:59:59.5+00:00", "2026-11-22T12:00:00.25+00:00"),  # ARM's fractional form
]


@pytest.mark.parametrize(("start", "end"), SPANS)
def test_script_prices_an_execution_like_status(start: str | None, end: str | None) -> None:
    """One spend figure: the guard's notification counts an execution's life as status and reap do."""
    from aca_gpu.workflow.spend.so_far import execution_seconds

    assert SCRIPT.execution_seconds(start, end, NOW) == execution_seconds(start, end, NOW)


def test_script_writes_money_like_acagpu() -> None:
    from aca_gpu.units import usd_text

    for usd in (0.0, 0.000008, 0.00004999, 0.00005, -0.00001, 0.0022, 0.0099, 0.01, 0.026, 3.77, 12.4):
        assert SCRIPT.usd_text(usd) == usd_text(usd)


@pytest.mark.parametrize(
    "tags",
    [
        {},
        {"acagpu:spent-gpu-seconds": "12.5", "acagpu:spent-at": "2026-11-23T11:00:00Z"},
        {"ACAGPU:Spent-GPU-Seconds": "3", "acagpu:spent-at": "2026-11-23T11:00:00+00:00"},
        {"acagpu:spent-gpu-seconds": "x", "acagpu:spent-at": "2026-11-23T11:00:00Z"},
        {"acagpu:spent-gpu-seconds": "-1", "acagpu:spent-at": "2026-11-23T11:00:00Z"},
        {"acagpu:spent-gpu-seconds": "1"},
    ],
)
def test_the_guard_reads_a_kept_runs_recorded_spend_as_acagpu_does(tags: dict[str, str]) -> None:
    """Item 11: the guard's post is the kept run's one figure: the group's record, read alike."""
    from aca_gpu.workflow.spend import record

    assert SCRIPT.recorded(tags) == record.recorded(tags)
    assert (SCRIPT.TAG_SPENT, SCRIPT.TAG_SPENT_AT) == (record.TAG_SPENT, record.TAG_SPENT_AT)
