"""One spend figure per group (status and reap alike), each figure naming its price table, and the
GPU a group is priced as being the one its attempt used."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from unittest.mock import create_autospec

import pytest

from aca_gpu import cost, naming
from aca_gpu.cli.cost import render_cost
from aca_gpu.config import Settings
from aca_gpu.errors import CloudError
from aca_gpu.models import AppInfo, Cloud, ExecutionInfo, JobInfo, ResourceGroupInfo
from aca_gpu.workflow.base.context import run_from_group
from aca_gpu.workflow.base.notify import reap_message
from aca_gpu.workflow.engine.plan import UpRequest, make_up_plan
from aca_gpu.workflow.fleet import reap as reap_flow
from aca_gpu.workflow.fleet.status import describe_run

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TABLE = cost.load_prices().label


def _group(run_id: str = "k1", gpu: str = "t4", age: timedelta = timedelta(hours=1)) -> ResourceGroupInfo:
    tags = naming.run_tags(run_id, owner="me", ttl=timedelta(minutes=30), now=NOW - age, gpu=gpu)
    return ResourceGroupInfo(name=f"rg-acagpu-{run_id}", location="eastus", tags=tags)


def _kept_run(group: ResourceGroupInfo, tester_s: float = 60.0) -> Cloud:
    """A kept run an hour old: its explorer stopped, one tester execution that lived `tester_s`."""
    cloud = create_autospec(Cloud, instance=True)
    rid = group.tags[naming.TAG_RUN_ID]
    cloud.list_resource_groups.return_value = [group]
    cloud.get_app.return_value = AppInfo(
        "id", f"cuda-explorer-{rid}", group.name, "Succeeded", "Stopped", None, max_replicas=1
    )
    cloud.list_apps.return_value = [cloud.get_app.return_value]
    cloud.get_job.return_value = JobInfo("id", f"gpu-tester-{rid}", group.name, "Succeeded")
    cloud.list_jobs.return_value = [cloud.get_job.return_value]
    began = NOW - timedelta(minutes=50)
    cloud.list_executions.return_value = [
        ExecutionInfo(
            "e1", "Succeeded", naming.iso_utc(began), naming.iso_utc(began + timedelta(seconds=tester_s))
        )
    ]
    return cloud  # type: ignore[no-any-return]


def _both(cloud: Cloud, group: ResourceGroupInfo) -> tuple[dict[str, object], reap_flow.ReapReport]:
    shown = describe_run(cloud, run_from_group(group), NOW)
    reaped = reap_flow.reap({"sub": cloud}, delete=False, now=NOW, spend=reap_flow.group_spend)
    return shown, reaped


def test_status_and_reap_show_one_figure_the_replica_lifetimes() -> None:
    group = _group()
    shown, reaped = _both(_kept_run(group), group)
    figure = round(cost.run_spend("t4", 60.0, "eastus").usd, 4)
    (item,) = reaped.items
    assert shown["cost"]["usd_estimate"] == item.spend_usd == figure  # type: ignore[index]
    assert item.spend_usd != round(cost.run_spend("t4", 3600.0).usd, 4)  # not the group's age priced
    assert reaped.as_dict()["spend_usd_estimate"] == figure  # the total keeps status's precision


def test_a_dedicated_group_is_node_time_in_both() -> None:
    group = _group(gpu="nc24-a100")
    shown, reaped = _both(_kept_run(group), group)
    figure = round(cost.run_spend("nc24-a100", 3600.0, "eastus").usd, 4)
    assert shown["cost"]["usd_estimate"] == reaped.items[0].spend_usd == figure  # type: ignore[index]


def test_replicas_that_cannot_be_read_are_an_unknown_figure_not_zero() -> None:
    group = _group()
    cloud = _kept_run(group)
    cloud.list_apps.side_effect = CloudError("denied", code="AuthorizationFailed")  # type: ignore[attr-defined]
    shown, reaped = _both(cloud, group)
    assert shown["cost"]["usd_estimate"] is None and "AuthorizationFailed" in shown["cost"]["basis"]  # type: ignore[index]
    assert reaped.items[0].spend_usd is None


def test_groups_that_are_not_runs_cost_no_read_and_show_no_figure() -> None:
    env = ResourceGroupInfo(
        "rg-acagpu-env-w", "eastus", naming.env_tags("w", owner="me", idle_ttl=timedelta(hours=1), gpus="t4")
    )
    stranger = ResourceGroupInfo("rg-other", "eastus", {"team": "ml"})
    untagged = ResourceGroupInfo("rg-acagpu-u1", "eastus", {naming.TAG_MANAGED: "true"})
    cloud = _kept_run(_group())
    cloud.list_resource_groups.return_value = [env, stranger, untagged]  # type: ignore[attr-defined]
    cloud.list_apps.return_value = []  # type: ignore[attr-defined]
    cloud.list_jobs.return_value = []  # type: ignore[attr-defined]
    report = reap_flow.reap({"sub": cloud}, delete=False, now=NOW, spend=reap_flow.group_spend)
    assert [i.spend_usd for i in report.items] == [None, None, None]
    cloud.get_app.assert_not_called()  # type: ignore[attr-defined]
    assert report.prices is None and "est. spend" not in reap_flow.render_text(report)


def test_every_reap_figure_names_its_price_table() -> None:
    group = _group()
    _, report = _both(_kept_run(group), group)
    assert report.prices == TABLE
    assert report.as_dict()["prices"] == TABLE
    assert TABLE in reap_flow.render_text(report).splitlines()[-2]  # the footer, before the dry-run note
    assert reap_flow.render_markdown(report).rstrip().endswith(f"({TABLE})")
    message = reap_message(report.as_dict())
    assert message is not None
    assert message["acagpu"]["prices"] == TABLE and message["text"].endswith(f"({TABLE})")


def test_the_notification_names_the_table_even_when_its_lines_are_folded() -> None:
    item = {"status": "deleted", "resource_group": "rg", "age_seconds": 1, "spend_usd_estimate": 0.5}
    doc = {"counts": {"deleted": 60}, "items": [item] * 60, "prices": TABLE}
    message = reap_message(doc)
    assert message is not None and "… and 20 more" in message["text"]
    assert message["text"].endswith(f"({TABLE})")


def test_cost_text_names_the_table_each_estimate_came_from() -> None:
    run = {
        "run_id": "r1",
        "ended_at": "2026-11-22T11:00:00+00:00",
        "estimate_usd": 0.01,
        "billed_usd": None,
        "difference_usd": None,
        "status": "not-billed-yet",
        "note": "",
        "prices": TABLE,
    }
    doc = {"since": "x", "data_delay": "Cost Management lags", "runs": [run, {**run, "prices": None}]}
    out = io.StringIO()
    render_cost(doc, out)
    assert f"({TABLE}; table not recorded for some runs)" in out.getvalue()
    out = io.StringIO()
    render_cost({**doc, "runs": [{**run, "estimate_usd": None}]}, out)
    assert "estimate:" not in out.getvalue()  # no estimate shown, no table to name


@pytest.mark.parametrize(("gpu", "attempt", "tagged"), [("a100", 1, "a100"), ("t4", 2, "t4")])
def test_each_attempt_is_tagged_with_the_gpu_it_uses(gpu: str, attempt: int, tagged: str) -> None:
    plan = make_up_plan(Settings(location="eastus"), UpRequest(run_id="r1", gpu="a100,t4"), owner="me")
    assert plan.for_attempt("eastus", attempt, gpu).tags[naming.TAG_GPU] == tagged


def test_an_old_gpu_list_tag_is_priced_as_its_first_gpu() -> None:
    group = _group(gpu="a100,t4")  # written before attempts were tagged one GPU each
    shown, reaped = _both(_kept_run(group), group)
    figure = round(cost.run_spend("a100", 60.0, "eastus").usd, 4)
    assert shown["cost"]["usd_estimate"] == reaped.items[0].spend_usd == figure  # type: ignore[index]
    assert naming.tag_gpu({naming.TAG_GPU: " A100 , t4"}) == "a100" and naming.tag_gpu({}) is None


def test_an_execution_never_seen_running_without_a_line_bills_nothing() -> None:
    """A region abandoned before a replica was placed: its execution was requested long ago, but no
    container ran, so nothing of it is billed (it used to count from the start request)."""
    from aca_gpu.workflow.engine.executions import ExecutionRun

    placed_never = ExecutionRun("e1", started=0.0, ended=20.0, stopped=20.0)
    assert placed_never.seconds == 0.0
    ran = ExecutionRun("e2", started=0.0, running=5.0, ended=20.0, stopped=20.0)
    assert ran.seconds == 15.0
    # a container that ran and ended before any look or stream saw it (its exit code says it ran)
    from aca_gpu.models import ExecutionInfo

    ended = ExecutionInfo("e3", "Succeeded", exit_codes=(0,))
    unseen = ExecutionRun("e3", started=0.0, ended=1.0, info=ended)
    assert 0 < unseen.seconds < 0.01
    printed = ExecutionRun("e3", started=0.0, first_line=8.0, ended=20.0)
    assert printed.seconds == 12.0


def test_the_cost_footnotes_name_a_few_runs_and_count_the_rest() -> None:
    """Item 11: `cost`'s footer listed all 49 run ids of one note on one line."""
    run = {"run_id": "r0", "ended_at": None, "estimate_usd": None, "billed_usd": None, "difference_usd": None,
           "status": "too-recent", "note": "no bill yet", "prices": None}  # fmt: skip
    many = [{**run, "run_id": f"r{i}"} for i in range(49)]
    out = io.StringIO()
    render_cost({"since": "x", "data_delay": "lags", "runs": many}, out)
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.endswith(": no bill yet")]
    assert line == "every run above (49): no bill yet", line
    other = [{**r, "note": "billed"} if i % 2 else r for i, r in enumerate(many)]
    out = io.StringIO()
    render_cost({"since": "x", "data_delay": "lags", "runs": other}, out)
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.endswith(": no bill yet")]
    assert line == "r0, r2, r4 and 22 more: no bill yet", line


def test_a_served_app_is_serving_or_scaled_to_zero_never_starting_at_zero() -> None:
    """`status` of a served app between requests said `starting` (as if a replica were being placed)
    while its own line said "served, at zero"; a replica that runs made it `running`, like a job."""
    from aca_gpu.models import ReplicaContainerInfo, ReplicaInfo
    from aca_gpu.workflow.spend.phase import Phase, Seen, judge, served_state

    up = ReplicaInfo("r1", "Running", (ReplicaContainerInfo("c", "Running"),))
    waking = ReplicaInfo("r1", "NotRunning", (ReplicaContainerInfo("c", "Waiting"),))
    assert [served_state(r) for r in ([], [waking], [waking, up])] == [
        "scaled-to-zero",
        "starting",
        "serving",
    ]
    assert judge(Seen(app_states=("scaled-to-zero",))) == Phase("scaled-to-zero")
    assert judge(Seen(app_states=("serving",))) == Phase("serving")
    assert judge(Seen(app_states=("stopped",))) == Phase("stopped")  # a kept run's explorer, as before
