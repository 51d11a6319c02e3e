"""`acagpu down`: remove a run through the one teardown path (billing first, then the group, verified).

A run that no longer exists is `absent` and exit 0, so a cleanup step that runs after a command
that already tore down (CI's `if: always()`) is idempotent. A run that is not in the command's
subscription but in another one the credential sees is no such all-clear: it is said, with the
`down` that removes it there (exit 2), since it still bills. Only groups tagged
`acagpu:managed=true` are ever touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, BadInput, NotFound, TeardownIncomplete
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import RunRef, Waiter, age_seconds, down_hint, find_run
from aca_gpu.workflow.engine.teardown import teardown_group
from aca_gpu.workflow.env.run_queues import drop_run_queues, run_queues


@dataclass(frozen=True)
class DownResult:
    doc: dict[str, Any]
    exit_code: int


def down(
    cloud: Cloud,
    ref: RunRef,
    progress: Progress,
    waiter: Waiter,
    *,
    wait: bool = True,
    elsewhere: Callable[[str], list[str]] | None = None,
) -> DownResult:
    """Find the run by its tags and remove it; `wait` reads the group back until ARM answers 404.
    `elsewhere(run_id)`: the other subscriptions holding a run not found here (module doc)."""
    try:
        run = find_run(cloud, ref)
    except NotFound:
        if not ref.run_id:
            raise
        if elsewhere is not None:
            _refuse_if_elsewhere(cloud, ref.run_id, elsewhere, progress)
        group = naming.RunNames(ref.run_id).resource_group
        doc: dict[str, Any] = {
            "command": "down",
            "run_id": ref.run_id,
            "resource_group": group,
            "age_seconds": None,
        }
        doc["teardown"] = {"status": "absent", "verified": True, "billing_stopped": True}
        return DownResult(doc, 0)
    doc = {
        "command": "down",
        "run_id": run.run_id,
        "resource_group": run.resource_group,
        "age_seconds": None if (age := age_seconds(run.tags)) is None else round(age),  # as `status`
    }
    dedicated = _dedicated(run.tags.get(naming.TAG_GPU))
    if run.tags.get(naming.TAG_SERVED):  # a served app ends here: its spend goes to the ledger
        doc["served_usd_estimate"] = _record_served(cloud, run)
    try:  # a queue run's queues are in its environment's account: found before the group goes
        queues = run_queues(cloud, run.resource_group, dict(run.tags))
    except AcaGpuError as exc:
        queues = None
        progress.warn(f"the run's queues were not looked for: {exc.message}")
    with progress.step(f"delete {run.resource_group}") as step:
        result = teardown_group(
            cloud, run.resource_group, wait_gone=wait, dedicated=dedicated, poll=max(0.05, waiter.interval)
        )
        doc["teardown"] = result.as_dict()
        step.update(result.status + (" (verified gone)" if result.verified else ""))
        if not result.clean:
            step.status = "fail"
            error = TeardownIncomplete(
                result.message or f"{run.resource_group} is still there",
                hint=down_hint(run.run_id, cloud, yes=False),
            )
            doc["error"] = error.as_dict()
            return DownResult(doc, error.exit_code)
    if queues is not None:
        with progress.step("queues") as step:
            left = drop_run_queues(cloud, queues)
            doc["queues"] = {"account": queues.account, "left": left}
            step.update("deleted" if not left else f"left: {'; '.join(left)}")
            if left:
                step.status = "fail"
                error = TeardownIncomplete(
                    f"run {run.run_id}'s queues were not all deleted: {'; '.join(left)}",
                    hint=f"{down_hint(run.run_id, cloud, yes=False)} again",
                )
                doc["error"] = error.as_dict()
                return DownResult(doc, error.exit_code)
    return DownResult(doc, 0)


def _refuse_if_elsewhere(
    cloud: Cloud, run_id: str, elsewhere: Callable[[str], list[str]], progress: Progress
) -> None:
    """NotFound naming the subscription(s) that hold the run; a failed look only warns (the run is
    absent here, which is all this command can tell then)."""
    with progress.step("other subscriptions") as step:
        try:
            holding = [s for s in elsewhere(run_id) if s.lower() != cloud.subscription_id.lower()]
        except AcaGpuError as exc:
            step.update(f"not looked in ({exc.message})")
            return
        step.update(", ".join(holding) if holding else f"run {run_id} is in none")
    if holding:
        where = " and ".join(holding)
        raise NotFound(
            f"run {run_id} is not in subscription {cloud.subscription_id} but in {where}: it was not deleted",
            hint=f"acagpu down --run-id {run_id} --subscription {holding[0]} --yes",
        )


def _record_served(cloud: Cloud, run: Any) -> float | None:
    """The served run's spend so far into the ledger (`acagpu cost` sets it beside the bill), read
    right before teardown scales it to zero; a failed read never holds the teardown."""
    from aca_gpu.workflow.spend import ledger

    try:
        return ledger.record_served(cloud, run)
    except AcaGpuError:
        return None


def _dedicated(gpus: str | None) -> bool:
    from aca_gpu.gpu.profiles import resolve_profile

    for alias in (gpus or "").split(","):
        try:
            if alias and not resolve_profile(alias).serverless:
                return True
        except BadInput:  # an unknown alias in a tag says nothing about billing
            continue
    return False


def render_down(doc: dict[str, Any]) -> str:
    teardown = doc.get("teardown", {})
    status = teardown.get("status")
    if status == "absent":
        return f"run {doc['run_id']}: {doc['resource_group']} is absent (nothing to delete)"
    if teardown.get("verified"):
        return f"run {doc['run_id']}: {doc['resource_group']} is gone (verified)"
    if status == "deleting":
        return (
            f"run {doc['run_id']}: nothing bills any more; {doc['resource_group']} is deleting "
            "(`acagpu status` shows it until it is gone)"
        )
    return f"run {doc['run_id']}: {doc['resource_group']} is still there"
