"""`acagpu test`: the gpu-tester again on a kept run, through the run engine (nothing created or removed)."""

from __future__ import annotations

from aca_gpu import naming
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow import ledger
from aca_gpu.workflow.aca_runtime import AcaRuntime
from aca_gpu.workflow.context import Run, Waiter
from aca_gpu.workflow.engine import run_plan
from aca_gpu.workflow.outcome import RunOutcome
from aca_gpu.workflow.plan import DEFAULT_MAX_MINUTES, make_test_plan

DEFAULT_TIMEOUT_S = DEFAULT_MAX_MINUTES * 60.0
DEFAULT_START_TIMEOUT_S = 15 * 60.0


def run_test(
    cloud: Cloud,
    run: Run,
    progress: Progress,
    waiter: Waiter,
    *,
    owner: str,
    start_timeout: float = DEFAULT_START_TIMEOUT_S,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> RunOutcome:
    gpu = (run.tags.get(naming.TAG_GPU) or "t4").split(",")[0]
    plan = make_test_plan(
        run.run_id,
        run.group.location,
        gpu,
        dict(run.tags),
        owner=owner,
        start_timeout_s=start_timeout,
        timeout_s=timeout,
    )
    outcome = run_plan(plan, AcaRuntime(cloud, waiter), progress, waiter)
    ledger.record(cloud, outcome)
    return outcome
