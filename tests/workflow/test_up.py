"""`up` orchestration over an autospec'd adapter: order, parallel branch, resume, cleanup, exit codes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import EXIT_INTERRUPTED, BadInput, CloudError, PreflightRefused
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import teardown as teardown_mod
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.engine.teardown import teardown_group
from aca_gpu.workflow.tester.up import up
from tests.workflow.fakecloud import PASS_DOC, FakeCloud, autospec_cloud, call_names

UP_KEYS = {
    "schema",
    "command",
    "run_id",
    "status",
    "runtime",
    "tester_image",
    "results",
    "timings",
    "location",
    "profile",
    "resources",
    "resumed",
    "explorer",
    "tester",
    "phases",
    "phase_clocks",
    "cost",
    "teardown",
    "attempts",
    "warnings",
    "error",
}


def _plan(**kw: Any) -> Any:
    request = UpRequest(run_id=kw.pop("run_id", "abc123"), start_timeout=kw.pop("start_timeout", "2s"), **kw)
    return make_plan(Settings(), request, owner="tester@host")


class Result:
    """An outcome with its document rendered once, as the CLI does."""

    def __init__(self, outcome: RunOutcome) -> None:
        self.outcome = outcome
        self.exit_code = outcome.exit_code
        self.doc = outcome.document()


def _up(fake: FakeCloud, **kw: Any) -> tuple[Result, Any, NullProgress]:
    cloud = autospec_cloud(fake)
    progress = NullProgress()
    outcome = up(cloud, _plan(**kw), progress, Waiter(interval=0.01))
    return Result(outcome), cloud, progress


def test_happy_path_order_report_and_verified_teardown() -> None:
    fake = FakeCloud(registered=False)
    result, cloud, _ = _up(fake)
    assert result.exit_code == 0, result.doc["error"]
    names = call_names(cloud)
    assert names[:6] == [
        "provider_registered",
        "register_provider",
        "available_profiles",
        "usages",
        "get_resource_group",
        "create_resource_group",
    ]
    assert names.index("create_environment") < names.index("create_job")
    # the probe is a job execution of the image under test: no explorer app, no exec session
    assert "create_app" not in names and "exec" not in names
    jobs = [c.args[0].name for c in cloud.create_job.call_args_list]
    assert sorted(jobs) == ["cuda-probe-abc123", "gpu-tester-abc123"], jobs
    probe_start = next(c for c in cloud.start_job_marked.call_args_list if c.args[1] == "cuda-probe-abc123")
    assert probe_start.args[2][0].image == "nvidia/cuda:12.1.1-base-ubuntu22.04"  # its own template
    assert probe_start.kwargs["key"] == "ACAGPU_ATTEMPT_ID"  # started by a token, as every shard is
    assert probe_start.args[2][0].env["ACAGPU_ATTEMPT_ID"] == probe_start.kwargs["token"]
    assert "start_job" not in names  # nothing is told by listing before and after a start
    assert names.index("start_job_marked") < names.index("job_logs") < names.index("delete_resource_group")
    # billing stops first: the jobs are gone before the group delete is sent
    deletes = [i for i, n in enumerate(names) if n == "delete_job"]
    assert deletes and max(deletes) < names.index("delete_resource_group")
    doc = result.doc
    assert set(doc) == UP_KEYS
    assert doc["status"] == "ok"
    assert doc["explorer"]["driver_version"] == "535.54.03"
    assert doc["explorer"]["compat"]["verdict"] == "ok"
    assert doc["tester"]["result"]["status"] == "pass"
    assert doc["tester"]["compat"]["verdict"] == "minor-compat"  # torch's CUDA 12.4 on R535: runs, reported
    # the prompt returns once nothing bills; the group delete is accepted and the fake removes it at once
    assert doc["teardown"] == {"status": "deleting", "verified": False, "billing_stopped": True}
    assert {"preflight", "probe and test", "teardown"} <= set(doc["phases"])
    assert {"time_to_verdict_s", "time_to_prompt_s"} <= set(doc["timings"])
    assert doc["cost"]["gpu_seconds"] >= 0 and "usd_estimate" in doc["cost"]
    assert not fake.groups


def test_explorer_and_tester_start_concurrently() -> None:
    # each create blocks until the other arrives: run one after the other, the barrier breaks
    fake = FakeCloud(barrier=threading.Barrier(2, timeout=5))
    result, _, _ = _up(fake)
    assert result.exit_code == 0, result.doc["error"]


def test_same_run_id_resumes_without_creating_again() -> None:
    fake = FakeCloud()
    first, _, _ = _up(fake, keep=True)
    assert first.exit_code == 0 and first.doc["teardown"]["status"] == "kept"
    app = fake.apps[("rg-acagpu-abc123", "cuda-explorer-abc123")]
    assert app.running_status == "Stopped"  # the stable Stop operation: nothing bills while kept
    again, cloud, _ = _up(fake)
    names = call_names(cloud)
    for create in ("create_resource_group", "create_environment", "create_app", "create_job"):
        assert create not in names
    cloud.start_app.assert_any_call("rg-acagpu-abc123", "cuda-explorer-abc123")
    assert set(again.doc["resumed"]) == {"resource_group", "environment", "explorer", "tester"}
    assert again.exit_code == 0 and not fake.groups


def test_replica_never_running_times_out_with_reasons_and_tears_down() -> None:
    fake = FakeCloud(replica_running=False)
    result, cloud, _ = _up(fake, start_timeout="1s")
    assert result.exit_code == 4
    assert "AssigningReplica" in result.doc["error"]["message"]
    cloud.delete_resource_group.assert_called_once_with("rg-acagpu-abc123", wait=False)
    assert result.doc["teardown"]["billing_stopped"] is True and not fake.groups


def test_keyboard_interrupt_tears_down() -> None:
    fake = FakeCloud()

    def interrupt() -> None:
        raise KeyboardInterrupt

    fake.on_exec = interrupt  # Ctrl-C arrives in the main thread, during nvidia-smi
    result, cloud, _ = _up(fake)
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.doc["status"] == "interrupted"
    cloud.delete_resource_group.assert_called_once()
    assert not fake.groups


def test_second_interrupt_leaves_the_run_and_says_how_to_remove_it() -> None:
    fake = FakeCloud()

    def interrupt() -> None:
        raise KeyboardInterrupt

    fake.on_exec = interrupt
    fake.on_delete = interrupt
    result, _, progress = _up(fake)
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.doc["teardown"]["status"] == "left"
    assert any("acagpu down --run-id abc123" in n for n in progress.notes)
    assert "rg-acagpu-abc123" in fake.groups


def test_untagged_group_with_our_name_is_refused_and_never_deleted() -> None:
    fake = FakeCloud()
    fake.create_resource_group("rg-acagpu-abc123", "eastus", {"team": "prod"})
    result, cloud, _ = _up(fake)
    assert result.exit_code == PreflightRefused.exit_code
    cloud.delete_resource_group.assert_not_called()
    assert "rg-acagpu-abc123" in fake.groups


def test_teardown_refuses_untagged_group() -> None:
    fake = FakeCloud()
    fake.create_resource_group("rg-mine", "eastus", {})
    cloud = autospec_cloud(fake)
    with pytest.raises(PreflightRefused):
        teardown_group(cloud, "rg-mine", poll=0.01)
    cloud.delete_resource_group.assert_not_called()
    cloud.delete_app.assert_not_called()


def test_tester_fail_is_exit_5_after_teardown() -> None:
    fake = FakeCloud(tester_doc={"status": "fail", "reason": "no-cuda"})
    result, _, _ = _up(fake)
    assert result.exit_code == 5
    assert result.doc["status"] == "gpu_check_failed"
    assert "no-cuda" in result.doc["error"]["message"]
    assert result.doc["teardown"]["billing_stopped"] is True


def test_image_newer_than_driver_is_exit_5() -> None:
    result, _, _ = _up(FakeCloud(), image="nvidia/cuda:12.8.0-runtime-ubuntu22.04")
    assert result.exit_code == 5
    compat = result.doc["explorer"]["compat"]
    assert compat["require_check"] == "fail"  # the container runtime would refuse to start it


def test_region_without_the_profile_is_refused_before_anything_is_made() -> None:
    fake = FakeCloud(offers=("Consumption",))
    result, cloud, _ = _up(fake)
    assert result.exit_code == 2
    cloud.create_resource_group.assert_not_called()
    assert result.doc["teardown"]["status"] == "nothing-created"


def test_group_that_does_not_go_away_is_exit_6(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teardown_mod, "GONE_DEADLINE_S", 0.05)
    result, _, _ = _up(FakeCloud(delete_sticks=True), wait=True)
    assert result.exit_code == 6
    assert result.doc["teardown"]["status"] == "incomplete"
    assert result.doc["teardown"]["verified"] is False
    assert "still exists" in result.doc["teardown"]["message"]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("gpu", "h100x", "unknown GPU"),
        ("location", "East US!", "invalid location"),
        ("ttl", "0h", "invalid TTL"),
        ("ttl", "forever", "invalid TTL"),
        ("run_id", "Way-Too-Long-Id-1", "invalid run id"),
        ("image", "bad image", "--image"),
    ],
)
def test_bad_values_are_bad_input(field: str, value: str, fragment: str) -> None:
    with pytest.raises(BadInput, match=fragment):
        _plan(**{field: value})


def test_plan_tags_and_names() -> None:
    plan = _plan(ttl="90m", keep=True)
    assert plan.names.resource_group == "rg-acagpu-abc123"
    assert plan.tags[naming.TAG_MANAGED] == "true"
    assert plan.tags[naming.TAG_RUN_ID] == "abc123"
    assert naming.TAG_KEEP not in plan.tags  # --keep defers teardown; the reaper still honours the TTL
    assert plan.keep
    assert plan.ttl.total_seconds() == 5400


def test_resuming_with_another_gpu_is_refused_before_anything_changes() -> None:
    fake = FakeCloud()
    first, _, _ = _up(fake, keep=True)
    assert first.exit_code == 0
    again, cloud, _ = _up(fake, gpu="a100")
    assert again.exit_code == 2
    assert "was made for --gpu t4" in again.doc["error"]["message"]
    cloud.create_environment.assert_not_called()
    cloud.delete_resource_group.assert_not_called()  # a refused resume leaves the kept run alone


def test_ctrl_c_while_the_group_create_is_in_flight_still_removes_the_group() -> None:
    fake = FakeCloud()
    create = fake.create_resource_group

    def create_then_interrupt(name: str, location: str, tags: Any) -> Any:
        create(name, location, tags)  # ARM made it, but the answer never reached us
        raise KeyboardInterrupt

    fake.create_resource_group = create_then_interrupt  # type: ignore[method-assign]
    result, cloud, _ = _up(fake)
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.doc["teardown"]["status"] != "nothing-created"
    cloud.delete_resource_group.assert_called_once_with("rg-acagpu-abc123", wait=False)
    assert not fake.groups


def test_a_ctrl_c_whose_keyboard_interrupt_was_swallowed_still_interrupts_and_tears_down() -> None:
    """The handler ran (the waits are cancelled) but its KeyboardInterrupt died in a finalizer: the
    run must end as interrupted and torn down, not as a timeout of a cancelled wait (exit 4)."""
    import contextlib
    import signal

    class SwallowingCloud(FakeCloud):
        def create_environment(self, spec: Any) -> Any:
            env = super().create_environment(spec)
            # swallowed, as Python does for an exception raised inside __del__
            with contextlib.suppress(KeyboardInterrupt):
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]
            return env

    fake = SwallowingCloud()
    result, cloud, _ = _up(fake)
    assert result.exit_code == EXIT_INTERRUPTED, result.doc["error"]
    assert result.doc["status"] == "interrupted"
    cloud.delete_resource_group.assert_called_once()
    assert not fake.groups


def test_the_tester_exit_code_is_read_when_its_execution_ends_after_its_result() -> None:
    """The tester is judged at its result line; its execution's end a moment later gives its exit code."""
    result, _, _ = _up(FakeCloud(tester_doc={**PASS_DOC, "result_grace_s": 0.0}))
    tester = result.doc["tester"]
    assert (tester["status"], tester["exit_code"], tester["exit_code_note"]) == ("pass", 0, None)


def test_a_lingering_tester_is_stopped_at_its_result_and_its_exit_code_read() -> None:
    """A tester staying its 15 s result grace is stopped once its result line is read (its grace only
    serves a late reader): it stops billing, and the stopped execution states its exit code."""
    fake = FakeCloud(tester_doc={**PASS_DOC, "result_grace_s": 15.0}, linger=True)
    result, cloud, _ = _up(fake)
    tester = result.doc["tester"]
    assert result.exit_code == 0 and tester["status"] == "pass"
    assert (tester["exit_code"], tester["exit_code_note"]) == (0, None)
    cloud.stop_execution.assert_called_once_with("rg-acagpu-abc123", "gpu-tester-abc123", tester["execution"])


def test_a_stopped_tester_whose_platform_states_no_code_says_so() -> None:
    """Where the stopped execution states no exit code (or Azure's -1 placeholder, dropped when
    read), the note says it was stopped and that the platform gave none: the verdict stands."""
    fake = FakeCloud(tester_doc={**PASS_DOC, "result_grace_s": 15.0}, linger=True, stopped_codes=())
    result, _, _ = _up(fake)
    tester = result.doc["tester"]
    assert result.exit_code == 0 and tester["status"] == "pass" and tester["exit_code"] is None
    assert "stopped after its result line" in tester["exit_code_note"]
    assert "stated no exit code for the stopped execution (Stopped)" in tester["exit_code_note"]


def test_a_kept_run_says_billing_stopped_only_once_its_tester_is_stopped() -> None:
    """`up --keep`: the lingering tester is stopped before the run says billing stopped; where its
    stop fails, the run says what may still bill instead."""
    fake = FakeCloud(tester_doc={**PASS_DOC, "result_grace_s": 15.0}, linger=True)
    result, _, _ = _up(fake, keep=True)
    assert result.doc["teardown"] == {"status": "kept", "verified": False, "billing_stopped": True}
    assert all(e.finished for runs in fake.executions.values() for e in runs)

    class Unstoppable(FakeCloud):
        def stop_execution(self, resource_group: str, job: str, execution: str) -> None:
            raise CloudError("the stop was refused", code="Conflict")

    fake = Unstoppable(tester_doc={**PASS_DOC, "result_grace_s": 15.0}, linger=True)
    result, _, _ = _up(fake, keep=True)
    teardown = result.doc["teardown"]
    assert (teardown["status"], teardown["billing_stopped"]) == ("incomplete", False)
    assert "the tester gpu-tester-abc123-exec1 still runs" in teardown["message"]
    assert "not stopped after its result line" in result.doc["tester"]["exit_code_note"]


def test_a_gpu_measured_that_is_not_the_profiles_is_said() -> None:
    """The emulator's host workload measures the machine's own GPU under a T4 profile: the document
    says the figures are the measured GPU's, not the profile's."""
    from tests.workflow.fakecloud import SMI_T4

    h200 = SMI_T4.replace("Tesla T4                ", "NVIDIA H200 NVL         ")
    result, _, _ = _up(FakeCloud(smi_text=h200, tester_doc={**PASS_DOC, "gpu": {"name": "NVIDIA H200 NVL"}}))
    assert result.exit_code == 0 and result.doc["profile"]["gpu"] == "Tesla T4"
    said = [w for w in result.doc["warnings"] if "the GPU measured is NVIDIA H200 NVL, not Tesla T4" in w]
    assert len(said) == 1 and "Consumption-GPU-NC8as-T4" in said[0]
    assert result.doc["results"][0]["warnings"] == said
    same, _, _ = _up(FakeCloud())
    assert not any("the GPU measured" in w for w in same.doc["warnings"])


def test_resuming_a_kept_run_keeps_it() -> None:
    """`up --run-id ID` of a run an `up --keep` left runs the check again and keeps the run: deleting
    it is `acagpu down`'s. A partial run that was never kept is finished and torn down as before."""
    from aca_gpu.workflow.tester.up import kept_plan

    fake = FakeCloud()
    first, _, _ = _up(fake, keep=True)
    assert first.doc["teardown"]["status"] == "kept"
    cloud = autospec_cloud(fake)
    plan = kept_plan(cloud, _plan())
    assert plan.keep and plan.kept_before
    assert plan.warnings() == [
        "run abc123 was kept (`up --keep`): resumed, it stays kept; "
        "`acagpu down --run-id abc123 --yes` removes it"
    ]
    outcome = up(cloud, plan, NullProgress(), Waiter(interval=0.01))
    assert outcome.exit_code == 0 and outcome.document()["teardown"]["status"] == "kept"
    cloud.delete_resource_group.assert_not_called()
    assert "rg-acagpu-abc123" in fake.groups

    partial = FakeCloud()  # a group and environment left by a crash, no explorer: not kept
    partial.create_resource_group("rg-acagpu-abc123", "eastus", _plan().tags)
    assert kept_plan(autospec_cloud(partial), _plan()).keep is False
    assert kept_plan(autospec_cloud(FakeCloud()), _plan()).keep is False  # no run yet


def test_a_run_removed_while_it_ran_is_said_so_not_bad_input() -> None:
    """`acagpu down --run-id` from another shell deleted the group while the tester's job was being
    made: the create's 404 was exit 2 "bad input" (which says nothing was created). The teardown
    finds the group gone: the run says it was removed, exit 7."""
    from aca_gpu.errors import NotFound

    class RemovedMidway(FakeCloud):
        def create_job(self, spec: Any) -> Any:
            self.delete_resource_group(spec.resource_group)  # another shell's `down`
            raise NotFound(
                f"create job {spec.name}: Resource group '{spec.resource_group}' could not be found."
            )

    result, _, _ = _up(RemovedMidway())
    assert result.doc["teardown"]["status"] == "absent"
    assert result.exit_code == 7, result.doc["error"]
    assert result.doc["error"]["code"] == "RunRemoved"
    assert "run abc123 was removed while it ran" in result.doc["error"]["message"]
