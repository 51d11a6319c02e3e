"""`logs --tester` when the tester's replica goes between the look at its execution and the read of
its console: ACA removed the replica with its log stream, and the command says so (exit 2,
ExecutionEnded), as it does when the execution was already seen finished, instead of printing
nothing and exiting 0. Seen in a suite run: test_full_lifecycle's `logs --tester` printed '' with
exit 0 while it polled for the moment the replica went.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aca_gpu.models import ExecutionInfo, ResourceGroupInfo
from aca_gpu.workflow.base.context import run_from_group
from aca_gpu.workflow.tester.logs import ExecutionEnded, log_lines


class _ReplicaGoneMeanwhile:
    """The execution is running at the first look and finished at every look after it; its console
    read finds no replica (the one-off read's `job_logs` then yields nothing)."""

    def __init__(self, lines: list[str]) -> None:
        self.looks = 0
        self.lines = lines

    def list_executions(self, rg: str, job: str) -> list[ExecutionInfo]:
        self.looks += 1
        status = "Running" if self.looks == 1 else "Succeeded"
        return [
            ExecutionInfo(
                "tester-1",
                status,
                "2026-11-27T09:00:00Z",
                None if self.looks == 1 else "2026-11-27T09:00:05Z",
            )
        ]

    def get_execution(self, rg: str, job: str, execution: str) -> ExecutionInfo:
        return self.list_executions(rg, job)[0]

    def job_logs(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        yield from self.lines


def _run() -> Any:
    return run_from_group(
        ResourceGroupInfo("rg-acagpu-life1", "eastus", {"acagpu:managed": "true", "acagpu:run-id": "life1"})
    )


def test_a_replica_gone_between_the_look_and_the_read_is_an_ended_execution() -> None:
    cloud = _ReplicaGoneMeanwhile([])
    with pytest.raises(ExecutionEnded, match="ended"):
        list(log_lines(cloud, _run(), source="tester"))  # type: ignore[arg-type]


def test_lines_read_before_the_replica_went_are_the_answer() -> None:
    cloud = _ReplicaGoneMeanwhile(["acagpu gpu-tester 1.0", "result: pass"])
    assert list(log_lines(cloud, _run(), source="tester")) == ["acagpu gpu-tester 1.0", "result: pass"]  # type: ignore[arg-type]
