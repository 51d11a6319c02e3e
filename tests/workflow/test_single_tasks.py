"""The probe and the tester are tasks of the engine's runner (engine/task_runner.py), one attempt at a time.

What the runner adds to them: a lost reading is the platform's fault and gets one more attempt
under a new token, a refusal is final, and when the pair's verdict is known (or Ctrl-C) the attempt
still running is stopped at once, before teardown (billing first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from aca_gpu.errors import ContainerRefused, InfraError
from aca_gpu.gpu.profiles import resolve_profile
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import executions
from aca_gpu.workflow.engine.probe_job import probe_container, probe_job
from tests.workflow.fakecloud import FakeCloud, autospec_cloud, call_names
from tests.workflow.test_up import _up

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


class LostLines(FakeCloud):
    """The probe's executions end, but their log stream never gives a line (lost in transport)."""

    def job_logs(self, resource_group: str, job: str, execution: str, **kwargs: Any) -> Iterator[str]:
        self._set_status(resource_group, job, execution, "Succeeded")
        return iter(())


class ShellFails(FakeCloud):
    """The probe's shell exits 127 before nvidia-smi (an image without `sh`)."""

    def job_logs(self, resource_group: str, job: str, execution: str, **kwargs: Any) -> Iterator[str]:
        runs = self.executions[(resource_group, job)]
        for i, info in enumerate(runs):
            if info.name == execution:
                runs[i] = replace(info, status="Failed", exit_codes=(127,))
        yield "exec: sh: not found"


def _probe(cloud: FakeCloud, runs: list[executions.ExecutionRun]) -> Any:
    container = probe_container(IMAGE, resolve_profile("t4"))
    return probe_job(
        autospec_cloud(cloud),
        "rg",
        "cuda-probe-x",
        container,
        Waiter(interval=0.01),
        start_timeout=5,
        runs=runs,
    )


def test_a_probe_whose_reading_was_lost_is_started_once_more_under_a_new_token() -> None:
    fake = LostLines()
    runs: list[executions.ExecutionRun] = []
    with pytest.raises(InfraError) as caught:
        _probe(fake, runs)
    assert caught.value.code == "ProbeLost"
    assert "(2 attempts)" in caught.value.message, caught.value.message
    started = fake.executions[("rg", "cuda-probe-x")]
    assert len(started) == 2 and len(runs) == 2
    tokens = {info.env[executions.ATTEMPT_TOKEN] for info in started}
    assert len(tokens) == 2, f"each attempt has a token of its own: {tokens}"


def test_a_probe_the_image_refused_is_not_started_again() -> None:
    fake = ShellFails()
    with pytest.raises(ContainerRefused) as caught:
        _probe(fake, [])
    assert "exited 127 before nvidia-smi ran" in caught.value.message
    assert len(fake.executions[("rg", "cuda-probe-x")]) == 1


def _blocking_tester(fake: FakeCloud) -> Callable[[], None]:
    """The tester runs on, printing nothing; the probe prints once the tester is being read (so
    its verdict comes while the tester runs, never before the tester started)."""
    release, reading = threading.Event(), threading.Event()

    def runs_on() -> None:
        reading.set()
        release.wait(10)

    def after_the_tester_started() -> None:
        reading.wait(10)

    fake.on_job_logs, fake.on_exec = runs_on, after_the_tester_started
    return release.set


def test_the_tester_is_stopped_as_soon_as_the_probe_gave_the_pairs_verdict() -> None:
    fake = FakeCloud()
    release = _blocking_tester(fake)
    try:
        # CUDA 12.8 cannot run on the probe's driver 535: the pair fails on the probe's word
        result, cloud, _ = _up(fake, image="nvidia/cuda:12.8.0-runtime-ubuntu22.04")
    finally:
        release()
    assert result.exit_code == 5, result.doc
    stops = [c.args for c in cloud.stop_execution.call_args_list]
    assert any(job.startswith("gpu-tester-") for _, job, _ in stops), stops
    names = call_names(cloud)
    assert names.index("stop_execution") < names.index("delete_resource_group"), names
