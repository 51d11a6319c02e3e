"""`acagpu test`: the gpu-tester again on a kept run, through the run engine (nothing created or removed),
or with `--env` the tester alone in a warm environment: a run of its own that makes and removes only
its tester job."""

from __future__ import annotations

from dataclasses import replace

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Run, Waiter
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime
from aca_gpu.workflow.engine.core import run_plan
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.plan import (
    DEFAULT_MAX_MINUTES,
    Plan,
    UpRequest,
    make_test_plan,
    make_up_plan,
)
from aca_gpu.workflow.env.warm_runtime import runtime_for
from aca_gpu.workflow.spend import ledger, record

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
    record.kept(cloud, outcome)  # the kept run's group carries what it has cost (spend/record.py)
    return outcome


def test_env_plan(
    settings: Settings,
    env: str,
    *,
    owner: str,
    gpu: str | None = None,
    run_id: str | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT_S,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Plan:
    """The plan of the tester alone inside warm environment `env` (no probe): what `test --env`
    makes (its tester job) and may spend, shown before it is confirmed."""
    minutes = max(1, int(timeout // 60))
    request = UpRequest(gpu=gpu, run_id=run_id, env=env, max_minutes=minutes)
    plan = make_up_plan(settings, request, owner=owner)
    return replace(plan, command="test", probe=False, start_timeout_s=start_timeout)


def test_in_env(cloud: Cloud, plan: Plan, progress: Progress, waiter: Waiter) -> RunOutcome:
    """Run `test_env_plan`'s plan: its job is made and removed."""
    placed, runtime = runtime_for(cloud, plan, waiter)
    outcome = run_plan(placed, runtime, progress, waiter)
    ledger.record(cloud, outcome)
    return outcome
