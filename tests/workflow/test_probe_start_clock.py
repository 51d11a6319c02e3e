"""The probe's GPU-seconds start with its container, not with the client's next look.

A probe lives under a second on the emulator's default time scale, and the client looks at its
replica at most once a second: a start taken from a look was off by up to a look (`up` and
`validate --env` read 34-61 % under the emulator's bill). The probe's log stream is asked for while
its image pulls, as the tester's is, and the service accepting it is the container's start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from aca_gpu.gpu.profiles import resolve_profile
from aca_gpu.models import MarkedStart, ReplicaContainerInfo, ReplicaInfo
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import executions
from aca_gpu.workflow.engine.probe_job import probe_container, probe_job
from tests.workflow.fakecloud import FakeCloud

STARTS_AFTER_S = 0.3  # the container starts this long after the execution was asked for


class SlowStart(FakeCloud):
    """The container starts STARTS_AFTER_S after Jobs_Start; its log stream is accepted then."""

    started_at: float | None = None
    began = threading.Event()

    def start_job_marked(
        self,
        resource_group: str,
        job: str,
        template: Sequence[Any] | None,
        *,
        key: str,
        token: str,
        cancel: threading.Event | None = None,
    ) -> MarkedStart:
        name = super().start_job_marked(resource_group, job, template, key=key, token=token)

        def start() -> None:
            self.started_at = time.monotonic()
            self.began.set()

        threading.Timer(STARTS_AFTER_S, start).start()
        return name

    def list_execution_replicas(self, resource_group: str, job: str, execution: str) -> list[ReplicaInfo]:
        if self.began.is_set():
            return [ReplicaInfo("r1", "Running", (ReplicaContainerInfo("c", "Running"),))]
        return [
            ReplicaInfo("r1", "NotRunning", (ReplicaContainerInfo("c", "Waiting"),), details="PullingImage")
        ]

    def job_logs(  # type: ignore[override]
        self,
        resource_group: str,
        job: str,
        execution: str,
        *,
        on_running: Callable[[], None] | None = None,
        **kwargs: object,
    ) -> Iterator[str]:
        self.began.wait(10)  # a follower's stream waits for the container, then is accepted
        if on_running is not None:
            on_running()
        yield from self._probe_lines()
        self._set_status(resource_group, job, execution, "Succeeded")


def test_the_probe_bills_from_its_containers_start_not_from_the_next_look() -> None:
    cloud = SlowStart()
    cloud.began = threading.Event()
    runs: list[executions.ExecutionRun] = []
    profile = resolve_profile("t4")
    container = probe_container("nvidia/cuda:12.4.1-base-ubuntu22.04", profile)
    # a user's default polling: the replica is looked at once a second
    result = probe_job(
        cloud, "rg", "cuda-probe-x", container, Waiter(interval=5.0), start_timeout=30, runs=runs
    )
    assert result.driver_version, result
    (run,) = runs
    assert cloud.started_at is not None and run.running is not None
    late = run.running - cloud.started_at
    assert abs(late) < 0.15, f"the probe's start was taken {late:.2f}s after its container started"


def test_an_explorer_is_looked_for_every_second_whatever_the_polling_interval() -> None:
    """A kept run's explorer (up --keep, each smi/exec wake) bills from its replica's start, and its
    figure begins at the look that sees it running: at the default 5 s interval a 3.7 s wake was
    recorded as 0.1 s. It is looked for at least every second, as a job's replica is."""
    from aca_gpu.models import AppInfo
    from aca_gpu.workflow.engine.probe import LOOK_S, wait_started

    fake = FakeCloud(replica_running=False)
    fake.apps[("rg", "cuda-explorer-x")] = AppInfo(
        "/apps/cuda-explorer-x", "cuda-explorer-x", "rg", "Succeeded", "Running", "rev1", None, 1, 1
    )
    asked = time.monotonic()
    threading.Timer(STARTS_AFTER_S, lambda: setattr(fake, "replica_running", True)).start()
    seen: list[float] = []
    wait_started(fake, "rg", "cuda-explorer-x", Waiter(interval=5.0), timeout=30, seen_at=seen)  # type: ignore[arg-type]
    assert seen and seen[0] - asked <= STARTS_AFTER_S + LOOK_S + 0.5, seen[0] - asked
