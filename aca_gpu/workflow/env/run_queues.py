"""A queue run's queues, which live in its environment's storage account, not in the run's group.

Deleting the run's group stops its workers (billing) but leaves the three queues
(`acagpu-<run>`, `-results`, `-poison`) in the environment's account. Whoever removes a queue run
by its group (`acagpu down`, the attached run's own teardown) removes them after the group, found
by the Event job's `acagpu:queue` tag (the account) and the group's `acagpu:env` (the
environment, whose group holds the account). Queues of a run the guard removed stay until this is
done again or the environment goes (its account with it).
"""

from __future__ import annotations

from dataclasses import dataclass

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.workflow.env.find import find_env


@dataclass(frozen=True)
class RunQueues:
    run_id: str
    env_group: str
    account: str


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
        return RunQueues(run_id, env_group.name, account)
    return None


def drop_run_queues(cloud: Cloud, found: RunQueues) -> list[str]:
    """Delete the run's three queues (a missing one is no error); the names left, each with why."""
    left: list[str] = []
    try:
        queues = cloud.queues(found.env_group, found.account)
    except AcaGpuError as exc:
        return [f"{name}: {exc.message}" for name in naming.run_queue_names(found.run_id)]
    for name in naming.run_queue_names(found.run_id):
        try:
            queues.delete(name)
        except AcaGpuError as exc:
            left.append(f"{name}: {exc.message}")
    return left
