"""`acagpu local` reads the GPUs' health like `up`: `nvidia-smi -q` in the explorer image, judged by
the ACA probe's rules. A failed GPU is exit 5, a degraded one passes with a warning, and a `-q` that
could not be read leaves health unread (never a verdict by itself).

The container runner is replaced by one that answers from real outputs (fixtures); the engine, the
local runtime and the outcome are the real ones. tests/local/ runs the same through real Podman.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aca_gpu.local import runner
from aca_gpu.local.gpus import parse_gpus
from aca_gpu.local.probe import HEALTH_COMMAND, PROBE_COMMAND, LocalTarget
from aca_gpu.local.runner import ContainerRun
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Engine
from aca_gpu.workflow.local.runtime import (
    LocalRequest,
    LocalRunOutcome,
    LocalRuntime,
    health_facts,
    make_local_plan,
)

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
TABLE = next(SMI.glob("24-*.txt")).read_text(encoding="utf-8").split("\n", 3)[3]
HEALTHY_Q = next(SMI.glob("95-*.txt")).read_text(encoding="utf-8").split("\n", 3)[3]
DEGRADED_Q = next(SMI.glob("90-*.txt")).read_text(encoding="utf-8").split("\n", 3)[3]
# one printed value changed in the real R580 H100 output: 2 volatile DRAM uncorrectable errors
DRAM = "            DRAM Uncorrectable                         : 0"
assert DRAM in HEALTHY_Q
FAILED_Q = HEALTHY_Q.replace(DRAM, DRAM.replace(": 0", ": 2"), 1)


def container(argv: tuple[str, ...], code: int | None, stdout: str = "", **kw: Any) -> ContainerRun:
    return ContainerRun("podman", " ".join(argv), code, stdout, kw.pop("stderr", ""), 0.5, **kw)


def run_local(
    monkeypatch: pytest.MonkeyPatch, query: ContainerRun | None
) -> tuple[LocalRunOutcome, list[Any]]:
    """`acagpu local --no-tester` on Podman, the containers answering the table and then `query`."""
    seen: list[Any] = []

    def fake(command: Any, timeout: float, cancel: Any = None) -> ContainerRun:
        seen.append(command)
        argv = tuple(command.argv[-len(HEALTH_COMMAND) :])
        if argv == HEALTH_COMMAND:
            assert query is not None, "nvidia-smi -q ran after a failed table"
            return query
        assert tuple(command.argv[-1:]) == PROBE_COMMAND
        return container(PROBE_COMMAND, 0, TABLE)

    monkeypatch.setattr(runner, "run_container", fake)
    plan = make_local_plan(
        LocalRequest(image="docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04", run_tester=False), "abc123"
    )
    target = LocalTarget("podman", "podman", parse_gpus("all"), run_id="abc123")
    runtime = LocalRuntime(target, "podman as asked")
    outcome = LocalRunOutcome(plan=plan, runtime="podman", why="podman as asked", commands=runtime.commands)
    Engine(plan, runtime, NullProgress(), Waiter(interval=0.01), outcome=outcome).run()
    return outcome, seen


def test_a_failed_gpu_is_exit_5_with_the_finding_named(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, seen = run_local(monkeypatch, container(HEALTH_COMMAND, 0, FAILED_Q))
    doc = outcome.document()
    assert outcome.exit_code == 5, doc["error"]
    assert doc["results"][0]["health_verdict"] == "failed"
    assert doc["error"]["message"].endswith(
        "GPU health failed: gpu0: 2 uncorrectable ECC error(s) since the driver loaded"
    )
    assert doc["explorer"]["health"]["gpus"][0]["findings"][0]["code"] == "ecc-uncorrectable"
    # the query ran in a container of its own, named apart from the table's
    assert [c.argv[-2:] for c in seen][-1] == list(HEALTH_COMMAND)
    assert "acagpu-abc123-explorer-health" in doc["commands"]["explorer_health"]


def test_a_degraded_gpu_passes_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, _ = run_local(monkeypatch, container(HEALTH_COMMAND, 0, DEGRADED_Q))
    doc = outcome.document()
    assert outcome.exit_code == 0, doc["error"]
    assert doc["results"][0]["health_verdict"] == "degraded"
    assert any("row remapping pending" in w for w in doc["warnings"])
    assert any("177 correctable ECC error(s)" in w for w in doc["warnings"])


def test_a_healthy_gpu_passes_without_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, _ = run_local(monkeypatch, container(HEALTH_COMMAND, 0, HEALTHY_Q))
    doc = outcome.document()
    assert (outcome.exit_code, doc["results"][0]["health_verdict"], doc["warnings"]) == (0, "healthy", [])
    assert "NVSMI LOG" in outcome.pairs[0].probe.raw_health


@pytest.mark.parametrize(
    ("query", "why"),
    [
        (
            container(HEALTH_COMMAND, 4, "Failed to initialize NVML: Unknown Error\n"),
            "nvidia-smi -q exited 4",
        ),
        (container(HEALTH_COMMAND, None, timed_out=True), "nvidia-smi -q did not finish"),
        (
            container(
                HEALTH_COMMAND, 125, stderr="Error: OCI runtime error", refused="Error: OCI runtime error"
            ),
            "the container did not start",
        ),
        (container(HEALTH_COMMAND, 0, "nvidia-smi says nothing useful\n"), "not nvidia-smi -q output"),
    ],
)
def test_health_that_cannot_be_read_is_unread_never_a_verdict(
    monkeypatch: pytest.MonkeyPatch, query: ContainerRun, why: str
) -> None:
    report, _ = health_facts(query)
    assert report.verdict is None and report.error is not None and why in report.error
    outcome, _ = run_local(monkeypatch, query)
    assert outcome.exit_code == 0, outcome.document()["error"]
    assert outcome.document()["explorer"]["health"]["verdict"] is None


def test_no_query_after_a_table_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi itself failed: that is the verdict, and `-q` is not asked (the fake refuses)."""

    def fake(command: Any, timeout: float, cancel: Any = None) -> ContainerRun:
        assert tuple(command.argv[-2:]) != HEALTH_COMMAND
        return container(PROBE_COMMAND, 18, "Failed to initialize NVML: Driver/library version mismatch\n")

    monkeypatch.setattr(runner, "run_container", fake)
    plan = make_local_plan(LocalRequest(run_tester=False), "abc123")
    runtime = LocalRuntime(LocalTarget("podman", "podman", parse_gpus("all"), run_id="abc123"), "podman")
    outcome = LocalRunOutcome(plan=plan, runtime="podman")
    Engine(plan, runtime, NullProgress(), Waiter(interval=0.01), outcome=outcome).run()
    assert outcome.exit_code == 5 and outcome.pairs[0].probe is not None
    assert outcome.pairs[0].probe.health is None
