"""Finding a warm environment by name, and the runs inside it, without touching either.

Everything that borrows or reads an environment starts here: a run (`warm_runtime`), staging
(`staging/stage.py`), `env list/show` (`lifecycle.view`), `env delete` and `reap` (no run may be
inside). Reading only, so it sits below all of them.
"""

from __future__ import annotations

from aca_gpu import naming
from aca_gpu.errors import NotFound, PreflightRefused
from aca_gpu.models import Cloud, EnvInfo, ResourceGroupInfo


def find_env(cloud: Cloud, name: str, *, to_use: bool = True) -> tuple[ResourceGroupInfo, EnvInfo]:
    """The warm environment `name`, or NotFound / PreflightRefused saying why it cannot be used
    (`to_use=False`: only to be read, as `env show` does, which shows a deleting one as such)."""
    naming.validate_env_name(name)
    names = naming.EnvNames(name)
    group = cloud.get_resource_group(names.resource_group)
    if group is None:
        raise NotFound(
            f"no warm environment {name!r} (resource group {names.resource_group} does not exist)",
            code="EnvironmentNotFound",
            hint=f"acagpu env create {name} -l REGION",
        )
    if not naming.is_env_group(dict(group.tags)):
        raise PreflightRefused(f"resource group {names.resource_group} is not an acagpu environment")
    if to_use and (group.provisioning_state or "") == "Deleting":
        # a run or a staging would otherwise fail on its first write with ARM's 409 about the group
        raise PreflightRefused(
            f"warm environment {name!r} is being deleted (resource group {names.resource_group})",
            code="EnvironmentDeleting",
            hint=f"once `acagpu env list` no longer lists it, `acagpu env create {name} -l {group.location}` "
            "makes it again",
        )
    env = cloud.get_environment(names.resource_group, names.environment)
    if env is None:
        raise NotFound(
            f"warm environment {name!r} has no environment {names.environment} (still being created?)",
            code="EnvironmentNotFound",
            hint=f"acagpu env create {name} -l {group.location} finishes it",
        )
    return group, env


def run_groups(cloud: Cloud, name: str) -> list[ResourceGroupInfo]:
    """The groups of runs that borrow environment `name` (tagged acagpu:env, with a run id); one
    already deleting is a run that ended (its billing stopped before its group delete was sent)."""
    return [
        g
        for g in cloud.list_resource_groups(naming.TAG_ENV, name)
        if naming.is_managed(dict(g.tags))
        and (g.provisioning_state or "") != "Deleting"
        and not naming.is_env_group(dict(g.tags))
        and g.tags.get(naming.TAG_RUN_ID)
    ]


def runs_inside(cloud: Cloud, resource_group: str, name: str) -> dict[str, list[str]]:
    """Run id -> where it is: the groups of runs borrowing the environment, and any app or job in
    the environment's own group (one without a run id counts too: nobody may remove it unseen)."""
    runs: dict[str, list[str]] = {}
    for group in run_groups(cloud, name):
        runs.setdefault(group.tags[naming.TAG_RUN_ID], []).append(group.name)
    pieces = [(a.name, a.tags) for a in cloud.list_apps(resource_group)]
    pieces += [(j.name, j.tags) for j in cloud.list_jobs(resource_group)]
    for piece, tags in pieces:
        runs.setdefault(dict(tags).get(naming.TAG_RUN_ID) or "(unknown)", []).append(piece)
    return runs


def running_replicas(cloud: Cloud, resource_group: str, name: str) -> int:
    """Executions still running for the environment (each holds one GPU replica while it runs)."""
    count = 0
    for group in [resource_group, *(g.name for g in run_groups(cloud, name))]:
        for job in cloud.list_jobs(group):
            count += sum(1 for e in cloud.list_executions(group, job.name) if not e.finished)
    return count
