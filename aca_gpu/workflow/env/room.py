"""`env create --wait-for-capacity DURATION`: the environment is made, then waited on until each of its
GPUs can place a replica there.

An environment places nothing by itself, so "no capacity" shows only when a replica asks for a node
(microsoft/azure-container-apps#1579, #1705). The wait asks with the engine's probe job
(engine/parking.py): a Manual job in the environment's own group, started once per sweep (the only
ARM write a sweep makes), its replica timeout ending an unplaced probe by itself, deleted when the
wait ends however it ends. Gaps, typed reasons, the bound and the unavailability cache are
`--wait-for-capacity`'s everywhere (engine/waiting.py). The environment stays at the bound (exit 3)
and on Ctrl-C: it is what was asked for, and with serverless profiles only it bills nothing idle.
"""

from __future__ import annotations

from typing import Any

from aca_gpu.errors import AcaGpuError, NotFound
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.units import duration_text
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.env.lifecycle import EnvPlan, create_env, profile_name

WINDOW_S = 300.0  # how long one ask may wait to be placed (ACA's placements take ~3 min)


def job_name(env: str) -> str:
    return f"gpu-room-{env}"[:32].rstrip("-")


def wait_for_room(
    cloud: Cloud, plan: EnvPlan, bound_s: float, progress: Progress, waiter: Waiter
) -> dict[str, Any]:
    """Each GPU of the environment asked for room in turn until it has some; `capacity_wait` of the
    document. Exit 3 at the bound (the environment kept), KeyboardInterrupt on Ctrl-C."""
    from aca_gpu.workflow.engine import parking, waiting  # only a wait loads the run engine

    rg = plan.names.resource_group
    env = cloud.get_environment(rg, plan.names.environment)
    if env is None:
        raise NotFound(f"environment {plan.names.environment} is not in {rg}")
    wait = waiting.CapacityWait(bound_s)
    for alias, profile in plan.gpus:
        spec = parking.probe_spec(
            job_name(plan.name),
            rg,
            plan.location,
            env.id,
            profile_name(alias),
            profile,
            plan.tags(),
            WINDOW_S,
        )
        with progress.step(f"room for a {alias.upper()} in {plan.location}") as step:
            step.update(f"asking with one start of {spec.name} per sweep (up to {duration_text(bound_s)})")
            try:
                parking.wait_for_room(cloud, spec, wait, alias, profile.type, progress, waiter)
            except AcaGpuError as exc:
                step.status = "fail"
                if exc.code in (waiting.EXPIRED, waiting.NOTHING_TO_WAIT_FOR):
                    kept = (
                        f"environment {plan.name} is made and bills nothing while idle: runs borrow it "
                        f"with --env {plan.name} once a {alias.upper()} has room"
                    )
                    exc.hint = f"{exc.hint}; {kept}" if exc.hint else kept
                raise
            step.update(f"placed a replica (after {len(wait.asks)} ask(s))")
    return wait.as_dict()


def create(cloud: Cloud, plan: EnvPlan, progress: Progress, waiter: Waiter) -> dict[str, Any]:
    """`env create`: made (or finished), then, with --wait-for-capacity, waited on for room."""
    doc = create_env(cloud, plan, progress)
    if plan.wait_for_capacity_s is not None:
        doc["capacity_wait"] = wait_for_room(cloud, plan, plan.wait_for_capacity_s, progress, waiter)
    return doc
