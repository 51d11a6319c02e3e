"""`acagpu up`: one (image, GPU) pair on Azure Container Apps, through the run engine.

Preflight → resource group → environment → explorer ∥ tester → nvidia-smi → result → teardown
(billing first) unless `--keep`; the same `--run-id` resumes. Everything else lives in the engine.
"""

from __future__ import annotations

from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow import ledger
from aca_gpu.workflow.aca_runtime import AcaRuntime
from aca_gpu.workflow.context import Waiter
from aca_gpu.workflow.engine import run_plan
from aca_gpu.workflow.outcome import RunOutcome
from aca_gpu.workflow.plan import Plan


def up(cloud: Cloud, plan: Plan, progress: Progress, waiter: Waiter) -> RunOutcome:
    outcome = run_plan(plan, AcaRuntime(cloud, waiter), progress, waiter)
    ledger.record(cloud, outcome)
    return outcome
