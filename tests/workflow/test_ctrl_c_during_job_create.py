"""Ctrl-C while a job's create is in flight: teardown removes the job, and no execution starts.

As in chaos seed 2017: ARM made the probe job, but its answer reached acagpu only after Ctrl-C
and after teardown had deleted the job. The pair must stop there, not start an execution (a GPU
replica billing) of a job teardown already removed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from aca_gpu.config import Settings
from aca_gpu.errors import EXIT_INTERRUPTED
from aca_gpu.models import JobInfo, JobSpec
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import core
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.tester.up import up
from tests.workflow.fakecloud import FakeCloud, autospec_cloud

T = TypeVar("T")


class AnswerAfterTeardown(FakeCloud):
    """A job create whose answer arrives after Ctrl-C, once teardown has deleted the job."""

    answered: list[str]

    def create_job(self, spec: JobSpec) -> JobInfo:
        job = super().create_job(spec)  # ARM made it; the answer is still on its way
        if spec.name.startswith("cuda-probe-"):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, handled in the main thread
        deadline = time.monotonic() + 10.0
        while (spec.resource_group, spec.name) in self.jobs and time.monotonic() < deadline:
            time.sleep(0.01)
        self.answered.append(spec.name)
        return job


def test_a_job_create_answered_after_ctrl_c_starts_no_execution() -> None:
    _no_execution_after_ctrl_c()


def test_no_execution_starts_even_before_the_pairs_relay_has_passed_ctrl_c_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pair's waits had a cancel of their own, set by a relay thread a moment after the run's:
    on a busy machine, teardown deleted the job and its create answered before the relay ran, and
    the probe started an execution (seen once with two suites on two cores). Here the relay never
    runs: the pair's cancel must read the run's at once."""
    real = core.spawn

    def spawn(call: Callable[[], T], name: str) -> Future[T]:
        if name.startswith("acagpu-relay"):
            return Future()  # never runs
        return real(call, name)

    monkeypatch.setattr(core, "spawn", spawn)
    _no_execution_after_ctrl_c()


def _no_execution_after_ctrl_c() -> None:
    assert threading.current_thread() is threading.main_thread()  # where the engine takes SIGINT
    fake = AnswerAfterTeardown()
    fake.answered = []
    cloud = autospec_cloud(fake)
    plan = make_plan(Settings(), UpRequest(run_id="cc2017", start_timeout="2s"), owner="tester@host")

    outcome = up(cloud, plan, NullProgress(), Waiter(interval=0.01))

    deadline = time.monotonic() + 10.0
    while not any(n.startswith("cuda-probe-") for n in fake.answered) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the pair's threads go on after `up` returned: what they do next counts too
    assert outcome.exit_code == EXIT_INTERRUPTED
    assert any(n.startswith("cuda-probe-") for n in fake.answered)
    starts = cloud.start_job.call_args_list + cloud.start_job_marked.call_args_list
    started: list[Any] = [c.args for c in starts]
    assert started == [], started
    cloud.delete_resource_group.assert_called_once_with("rg-acagpu-cc2017", wait=False)
    assert not fake.groups  # (a job made after it is gone with it on ARM; the fake keeps it)
