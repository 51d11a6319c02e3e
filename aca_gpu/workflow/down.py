"""Teardown: delete a run's resource group and wait until it is really gone (404), never anything untagged.

"Delete accepted" is not "deleted": the group is read back until ARM says it does not exist, and
a group still there after the deadline is exit 6 with the command that finishes the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import CloudError, PreflightRefused, TeardownIncomplete, WaitTimedOut
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.context import RunRef, Waiter, age_seconds, find_run

DELETE_TIMEOUT_S = 45 * 60.0
DELETE_ATTEMPTS = 3


def teardown_group(
    cloud: Cloud, name: str, waiter: Waiter, *, wait: bool = True, timeout: float | None = None
) -> dict[str, Any]:
    """Delete one managed resource group; returns {status, verified}. Untagged groups are refused."""
    group = cloud.get_resource_group(name)
    if group is None:
        return {"status": "absent", "verified": True}
    if not naming.is_managed(dict(group.tags)):
        raise PreflightRefused(
            f"resource group {name!r} is not tagged {naming.TAG_MANAGED}=true; acagpu never deletes it"
        )
    for attempt in range(1, DELETE_ATTEMPTS + 1):
        try:
            cloud.delete_resource_group(name, wait=wait)
            break
        except CloudError:
            if attempt == DELETE_ATTEMPTS:
                raise
    if not wait:
        return {"status": "deleting", "verified": False}
    timeout = DELETE_TIMEOUT_S if timeout is None else timeout
    try:
        waiter.until(
            f"resource group {name} to be deleted",
            lambda: True if cloud.get_resource_group(name) is None else None,
            timeout=timeout,
        )
    except WaitTimedOut as exc:
        raise TeardownIncomplete(
            f"resource group {name} still exists after teardown: {exc.message}",
            hint=f"acagpu down -g {name}",
        ) from exc
    return {"status": "deleted", "verified": True}


@dataclass(frozen=True)
class DownResult:
    doc: dict[str, Any]
    exit_code: int


def down(cloud: Cloud, ref: RunRef, progress: Progress, waiter: Waiter, *, wait: bool = True) -> DownResult:
    """`acagpu down`: find the run by its tags, delete its group, verify (unless --no-wait)."""
    run = find_run(cloud, ref)
    doc: dict[str, Any] = {
        "command": "down",
        "run_id": run.run_id,
        "resource_group": run.resource_group,
        "age_seconds": age_seconds(run.tags),
    }
    with progress.step(f"delete {run.resource_group}") as step:
        try:
            doc["teardown"] = teardown_group(cloud, run.resource_group, waiter, wait=wait)
        except TeardownIncomplete as exc:
            step.status = "fail"
            doc["teardown"] = {"status": "incomplete", "verified": False}
            doc["error"] = exc.as_dict()
            return DownResult(doc, exc.exit_code)
        step.update(doc["teardown"]["status"] + (" (verified)" if doc["teardown"]["verified"] else ""))
    return DownResult(doc, 0)


def render_down(doc: dict[str, Any]) -> str:
    teardown = doc.get("teardown", {})
    if teardown.get("verified"):
        return f"run {doc['run_id']}: {doc['resource_group']} is gone (verified)"
    if teardown.get("status") == "deleting":
        return (
            f"run {doc['run_id']}: deletion of {doc['resource_group']} accepted; "
            "`acagpu status` shows when it is gone"
        )
    return f"run {doc['run_id']}: {doc['resource_group']} is still there"
