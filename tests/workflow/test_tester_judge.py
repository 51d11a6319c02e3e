"""The tester's verdict from an execution read: a container code counts only once the execution ended."""

from __future__ import annotations

from aca_gpu.models import ExecutionInfo
from aca_gpu.workflow.engine.tester_run import TesterRun, judge


def test_a_code_read_while_the_execution_runs_is_no_verdict() -> None:
    # Azure reports -1 while the execution runs: a read racing its end must not become a GPU failure
    racing = TesterRun("tester-1", info=ExecutionInfo("tester-1", "Running", exit_codes=(-1,)))
    outcome = judge(racing)
    assert outcome.status == "unavailable" and outcome.exit_code is None
    assert "-1" not in (outcome.reason or "")


def test_an_ended_execution_keeps_its_exit_code() -> None:
    ended = TesterRun("tester-1", info=ExecutionInfo("tester-1", "Failed", exit_codes=(3,)))
    outcome = judge(ended)
    assert outcome.status == "fail" and outcome.exit_code == 3
    assert outcome.reason == "the tester exited with code 3"
