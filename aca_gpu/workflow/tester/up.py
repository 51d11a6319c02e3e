"""`acagpu up`: one (image, GPU) pair on Azure Container Apps, through the run engine.

Preflight → resource group → environment → explorer ∥ tester → nvidia-smi → result → teardown
(billing first) unless `--keep`; the same `--run-id` resumes. Everything else lives in the engine.
"""

from __future__ import annotations

from dataclasses import replace

from aca_gpu import naming
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import run_plan
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.plan import Plan
from aca_gpu.workflow.env.warm_runtime import runtime_for
from aca_gpu.workflow.spend import ledger, record


def capped_plan(plan: Plan, usd: float | None) -> Plan:
    """`up --max-cost`: capped at `usd`, priced per replica of its first GPU in its first region."""
    if usd is None:
        return plan
    from aca_gpu import cost

    return plan.with_max_cost(usd, cost.price_per_hour(plan.pairs[0].profile, location=plan.location) / 3600)


def kept_plan(cloud: Cloud, plan: Plan) -> Plan:
    """`up --run-id ID` of a run that an `up --keep` left (its explorer app is there: no other command
    makes one) keeps it again. A resume runs the check again; tearing a kept run down would delete
    what the user chose to keep, as a side effect of a command that asked nothing about deleting:
    that is `acagpu down --run-id ID`'s, with its own `--yes`."""
    if plan.keep or plan.env is not None:
        return plan
    group = cloud.get_resource_group(plan.names.resource_group)
    tags = dict(group.tags) if group is not None else {}
    if not naming.is_managed(tags) or tags.get(naming.TAG_RUN_ID) != plan.run_id:
        return plan  # not this run's (create_place refuses it), or no run yet
    rg = plan.names.resource_group
    if not any(cloud.get_app(rg, pair.explorer) is not None for pair in plan.pairs):
        return plan  # a partial run that was not kept: the resume finishes it and tears it down
    return replace(plan, keep=True, kept_before=True)


def up(cloud: Cloud, plan: Plan, progress: Progress, waiter: Waiter) -> RunOutcome:
    placed, runtime = runtime_for(cloud, plan, waiter)  # cold, or borrowed with --env
    outcome = run_plan(placed, runtime, progress, waiter)
    ledger.record(cloud, outcome)
    record.kept(cloud, outcome)  # a kept run's group carries what it has cost (spend/record.py)
    return outcome
