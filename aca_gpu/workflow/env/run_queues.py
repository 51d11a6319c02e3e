"""A queue run's queues and its workers' roles on them, which live in its environment's storage
account, not in the run's group.

Deleting the run's group stops its workers (billing) but leaves the three queues
(`acagpu-<run>`, `-results`, `-poison`) in the environment's account, and the role assignments
that let the run's Event job read and write them (one at each queue's scope: Azure keeps an
assignment after its principal or its resource is gone). Whoever removes a queue run (its own
teardown, `acagpu down`, `reap`, the guard's script) removes them after the group, found by the
Event job's `acagpu:queue` tag (the account) and the group's `acagpu:env` (the environment, whose
group holds the account): first the role assignments, then the queues.

Nothing is deleted on a name alone: a queue goes only when its metadata `acagpu_run_id` names the
run (set when acagpu made it), and a role assignment only when its description does
(`acagpu:run-id=<run>`); anything else at those names is left and said.
"""

from __future__ import annotations

from dataclasses import dataclass

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.workflow.env.find import find_env

OWNER_KEY = "acagpu_run_id"  # a queue's metadata name (metadata names are C# identifiers)
# the worker's role on each of its run's queues, in run_queue_names order: it receives, renews and
# deletes items (and the KEDA rule reads the queue's length with the same identity); it only adds
# results and poisoned items
ROLES = ("contributor", "sender", "sender")


def owner_marks(run_id: str) -> dict[str, str]:
    return {OWNER_KEY: run_id}


def role_description(run_id: str) -> str:
    return f"{naming.TAG_RUN_ID}={run_id}"


@dataclass(frozen=True)
class RunQueues:
    run_id: str
    env_group: str
    account: str
    job_roles: tuple[str, ...] = ()  # a warm floor's role on its own job: deleted after the job goes


def run_queues(cloud: Cloud, group: str, tags: dict[str, str]) -> RunQueues | None:
    """The queues of the run in `group`, when it is a queue run (read before the group goes)."""
    env, run_id = tags.get(naming.TAG_ENV), tags.get(naming.TAG_RUN_ID)
    if not env or not run_id:
        return None
    for job in cloud.list_jobs(group):
        text = dict(job.tags).get(naming.TAG_QUEUE)
        if not text:
            continue
        try:
            account = naming.parse_queue_tag(text)["account"]
        except ValueError:
            continue
        env_group, _ = find_env(cloud, env)
        mine = [
            a.id
            for a in cloud.job_role_assignments(group, job.name)
            if a.description == role_description(run_id)
        ]
        return RunQueues(run_id, env_group.name, account, tuple(mine))
    return None


def grant_worker_roles(cloud: Cloud, found: RunQueues, principal_id: str) -> list[str]:
    """The Event job's identity gets its role on each of the run's queues; the assignments' ids."""
    names = naming.run_queue_names(found.run_id)
    said = role_description(found.run_id)
    return [
        cloud.grant_queue_role(found.env_group, found.account, name, role, principal_id, said)
        for name, role in zip(names, ROLES, strict=True)
    ]


def revoke_worker_roles(cloud: Cloud, found: RunQueues) -> tuple[int, list[str]]:
    """Delete the assignments this run made on its queues (and on its job, read before the job went):
    (how many, what was left and why)."""
    deleted, left = 0, []
    for assignment_id in found.job_roles:
        try:
            cloud.delete_role_assignment(assignment_id)
            deleted += 1
        except AcaGpuError as exc:
            left.append(f"the job's role assignment {assignment_id.rsplit('/', 1)[-1]}: {exc.message}")
    for name in naming.run_queue_names(found.run_id):
        try:
            for assignment in cloud.queue_role_assignments(found.env_group, found.account, name):
                if assignment.description != role_description(found.run_id):
                    continue  # not this run's: never deleted
                cloud.delete_role_assignment(assignment.id)
                deleted += 1
        except AcaGpuError as exc:
            left.append(f"role assignments on {name}: {exc.message}")
    return deleted, left


def drop_run_queues(cloud: Cloud, found: RunQueues) -> list[str]:
    """The run's role assignments, then its three queues (a missing one is no error); what was left,
    each with why."""
    _, left = revoke_worker_roles(cloud, found)
    try:
        queues = cloud.queues(found.env_group, found.account)
    except AcaGpuError as exc:
        return left + [f"{name}: {exc.message}" for name in naming.run_queue_names(found.run_id)]
    for name in naming.run_queue_names(found.run_id):
        try:
            marks = queues.metadata(name)
            if marks is None:
                continue  # gone already
            if marks.get(OWNER_KEY) != found.run_id:
                said = f"its metadata does not name run {found.run_id} ({OWNER_KEY}): not acagpu's"
                left.append(f"{name}: {said}")
                continue
            queues.delete(name)
        except AcaGpuError as exc:
            left.append(f"{name}: {exc.message}")
    return left
