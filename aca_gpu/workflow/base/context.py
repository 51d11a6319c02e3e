"""Finding a run from what the user typed, and the few things every workflow shares.

State lives in tags (docs/architecture.md): a run is a resource group tagged `acagpu:managed=true` and
`acagpu:run-id`. Nothing here keeps local state, so `down` or `smi` work from any machine.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput, InfraError, NotFound, PreflightRefused, WaitTimedOut
from aca_gpu.models import Cloud, ResourceGroupInfo

T = TypeVar("T")
PROBE_LOSSES = 3  # consecutive infrastructure failures a wait shrugs off before giving up


def open_cloud(settings: Settings) -> Cloud:
    """The Azure adapter, imported lazily so `acagpu --help` never loads the SDK."""
    from aca_gpu.azure.cloud import AzureCloud

    cloud: Cloud = AzureCloud.from_settings(settings)
    return cloud


def down_hint(run_id: str, cloud: object | None = None, *, yes: bool = True) -> str:
    """The `acagpu down` that removes a run, pasted into the same shell: with `--subscription` when
    the command was pointed at another subscription than the shell's (`Settings.named_subscription`;
    a bare `down` would look in the wrong one)."""
    settings = getattr(getattr(cloud, "clients", None), "settings", None)
    named = getattr(settings, "named_subscription", None)
    scope = f" --subscription {named}" if named else ""
    return f"acagpu down --run-id {run_id}{scope}" + (" --yes" if yes else "")


def resolve_owner(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """Who to write into `acagpu:owner`: explicit setting, the Actions run, else user@host."""
    env = os.environ if env is None else env
    if settings.owner:
        return settings.owner
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_REPOSITORY"):
        return f"gh:{env['GITHUB_REPOSITORY']}#{env.get('GITHUB_RUN_ID', '?')}"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class RunRef:
    """What the user named: a run id, a resource group, or nothing (then: the only run there is)."""

    run_id: str | None = None
    resource_group: str | None = None

    def validate(self) -> RunRef:
        if self.run_id is not None:
            naming.validate_run_id(self.run_id)
        if self.resource_group is not None:
            naming.validate_rg_name(self.resource_group)
        return self


@dataclass(frozen=True)
class Run:
    """A run found in the subscription, read back from its resource group's tags."""

    group: ResourceGroupInfo
    names: naming.RunNames

    @property
    def run_id(self) -> str:
        return self.names.run_id

    @property
    def resource_group(self) -> str:
        return self.group.name

    @property
    def tags(self) -> Mapping[str, str]:
        return self.group.tags


def run_from_group(group: ResourceGroupInfo) -> Run:
    run_id = group.tags.get(naming.TAG_RUN_ID) or group.name.removeprefix("rg-acagpu-")
    return Run(group=group, names=naming.RunNames(run_id))


def find_run(cloud: Cloud, ref: RunRef) -> Run:
    """The managed resource group the user meant; refuses anything not tagged as acagpu's."""
    if ref.resource_group:
        group = cloud.get_resource_group(ref.resource_group)
        if group is None:
            raise NotFound(f"resource group {ref.resource_group!r} not found")
        if not naming.is_managed(dict(group.tags)):
            raise PreflightRefused(
                f"resource group {group.name!r} is not tagged {naming.TAG_MANAGED}=true; not acagpu's"
            )
        not_a_run(group)
        return run_from_group(group)
    if ref.run_id:
        group = cloud.get_resource_group(naming.RunNames(ref.run_id).resource_group)
        if group is None or group.tags.get(naming.TAG_RUN_ID) != ref.run_id:
            tagged = [
                g
                for g in cloud.list_resource_groups(naming.TAG_RUN_ID, ref.run_id)
                if naming.is_managed(dict(g.tags))
            ]
            group = tagged[0] if tagged else None
        if group is None or not naming.is_managed(dict(group.tags)):
            raise NotFound(f"no run {ref.run_id!r} found", hint="`acagpu status` lists the runs that exist")
        return run_from_group(group)
    runs = list_runs(cloud)
    if not runs:
        raise NotFound("no acagpu runs found in this subscription", hint="start one with `acagpu up --keep`")
    if len(runs) > 1:
        ids = ", ".join(sorted(r.run_id for r in runs))
        raise BadInput(f"several runs exist ({ids}); pass --run-id")
    return runs[0]


def not_a_run(group: ResourceGroupInfo) -> None:
    """A warm environment's or the guard's group is acagpu's but no run: `down -g` deleted a warm
    environment (runs inside, its registry and share with it) past `env delete`'s check, and the
    guard's group without its role assignment. Each has its own command."""
    tags = dict(group.tags)
    if naming.is_env_group(tags):
        name = tags.get(naming.TAG_ENV, "NAME")
        raise PreflightRefused(
            f"resource group {group.name!r} is warm environment {name}, not a run",
            code="NotARun",
            hint=f"`acagpu env delete {name} --yes` deletes it (refused while runs are inside); "
            f"`acagpu env show {name}` describes it",
        )
    if tags.get(naming.TAG_ROLE) == "guard":
        raise PreflightRefused(
            f"resource group {group.name!r} holds the guard, not a run",
            code="NotARun",
            hint="`acagpu guard uninstall --yes` removes it with its role assignment",
        )


def list_runs(cloud: Cloud) -> list[Run]:
    groups = cloud.list_resource_groups(naming.TAG_MANAGED, "true")
    return [
        run_from_group(g)
        for g in groups
        if naming.is_managed(dict(g.tags))
        and g.tags.get(naming.TAG_ROLE) != "guard"
        and not naming.is_env_group(dict(g.tags))  # a warm environment is no run (`acagpu env list`)
    ]


def age_seconds(tags: Mapping[str, str], now: datetime | None = None) -> float | None:
    created = naming.parse_iso_utc(tags.get(naming.TAG_CREATED_AT, ""))
    if created is None:
        return None
    return max(0.0, ((now or datetime.now(UTC)) - created).total_seconds())


class ChildCancel(threading.Event):
    """A cancel of its own that is also set whenever `parent` is. A pair's waits get one, so the
    engine can stop a pair (its verdict is known) without stopping the run; the run's Ctrl-C sets
    the parent, and a check of this one reads the parent at once. A thread that relays the parent's
    set to it (to wake its `wait`s) can come too late for a check: on a busy machine teardown had
    deleted a job, and the job's create had answered, before the relay ran, and an execution
    started."""

    def __init__(self, parent: threading.Event) -> None:
        super().__init__()
        self.parent = parent

    def is_set(self) -> bool:
        return super().is_set() or self.parent.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.parent.is_set() or super().wait(timeout) or self.parent.is_set()


@dataclass
class Waiter:
    """Deadline-bound polling shared by every workflow wait; `cancel` stops all waits at once (Ctrl-C)."""

    interval: float = 5.0
    cancel: threading.Event = field(default_factory=threading.Event)

    def until(
        self,
        what: str,
        probe: Callable[[], T | None],
        *,
        timeout: float,
        describe: Callable[[], str] | None = None,
    ) -> T:
        """Call `probe` until it returns something other than None, or raise WaitTimedOut naming `what`."""
        deadline = time.monotonic() + timeout
        lost = 0
        while True:
            if self.cancel.is_set():
                raise WaitTimedOut(f"stopped waiting for {what}: cancelled")
            try:
                value = probe()
                lost = 0
            except InfraError:  # one unreadable answer says nothing about what is awaited
                lost += 1
                if lost > PROBE_LOSSES:
                    raise
                value = None
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                extra = describe() if describe else ""
                suffix = f" ({extra})" if extra else ""
                raise WaitTimedOut(f"timed out after {timeout:.0f}s waiting for {what}{suffix}")
            self.cancel.wait(min(self.interval, max(0.0, deadline - time.monotonic())) or 0.01)
