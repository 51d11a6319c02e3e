"""What a run's group has cost so far: the one figure `status` and `reap` both show for it.

Two commands pricing the same group two ways gave two answers (reap priced the group's whole age as
if a replica ran all along, status the replicas that did run), so both call `run_spend` here.

Serverless: every job execution in the run's group counts from ARM's start and end times (whatever
the job is: probe, tester, a `run`'s workload, a shard), every app from the run's creation while it
has a running replica (an upper bound, labelled as such); a stopped app bills nothing now, and what
it billed before it was stopped is not known from ARM (it lists only live replicas), so the figure
says it leaves that out (`uncounted`) instead of presenting it as the whole spend. A served app (the
group's `acagpu:served` tag) is the exception: its replicas come and go with traffic, so their lives
are read from its system events (`served.py`), at zero replicas or not.
Dedicated: the node bills while the environment exists, replicas or not, so the figure is node time
(the group's whole age): a kept, stopped dedicated run is not "≈$0.00". When the replicas cannot be
read, a serverless figure is unknown (None) rather than a confident $0.00.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aca_gpu import cost, naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.gpu.profiles import GpuProfile, resolve_profile
from aca_gpu.models import Cloud
from aca_gpu.workflow.base.context import Run, age_seconds
from aca_gpu.workflow.spend import record
from aca_gpu.workflow.spend.phase import Phase, Seen, execution_state, judge, served_state
from aca_gpu.workflow.spend.served import served_time

NODE_BASIS = "node time since creation (a dedicated node bills replicas or not)"
REPLICA_BASIS = "replica lifetimes"
UNCOUNTED = (
    "a stopped app's past use is not counted (a kept run's explorer before it was stopped, each "
    "smi/exec wake): ARM keeps no record of a stopped app's replicas; `acagpu cost` has the bill"
)


@dataclass(frozen=True)
class Executions:
    """How many job executions a run has, running and ended, whatever its jobs are called (a probe
    and a tester, a `run`'s workload, the shards of a fan-out)."""

    running: int = 0  # live, a container of it running
    ended: int = 0
    apps: int = 0  # container apps: only `up --keep` leaves one (the CUDA explorer)
    stopped_apps: int = 0  # of them, stopped now: their earlier replica lives are not in the figure
    starting: int = 0  # live, no container of it running yet (placement, image pull)
    shards: dict[str, int] | None = None  # a fan-out's shards by state (phase.shard_counts)
    recorded: bool = False  # the group records what acagpu measured (record.py): nothing left out
    served_replicas: int = 0  # a served app's replicas its events show, each start counted once

    def as_dict(self) -> dict[str, int]:
        return {"starting": self.starting, "running": self.running, "ended": self.ended}


@dataclass(frozen=True)
class RunSpend:
    """A run's phase, as read while pricing it, and what it has cost so far (None: unknown)."""

    phase: str
    gpu_seconds: float
    node_seconds: float | None
    estimate: cost.CostEstimate | None
    basis: str
    executions: Executions = Executions()
    phase_detail: str | None = None  # how far the phase is: `environment InProgress`, `shards 20: ...`

    @property
    def usd(self) -> float | None:
        """Rounded like every spend figure acagpu prints, so status and reap agree to the digit; an
        amount above zero that four decimals would make 0.0 (a container's first tenth of a second)
        keeps its own digits, so the money text says `<$0.0001` rather than `$0.00`."""
        if self.estimate is None:
            return None
        rounded = round(self.estimate.usd, 4)
        return rounded if rounded or self.estimate.usd <= 0 else round(self.estimate.usd, 8)

    @property
    def table(self) -> str | None:
        """The price table the figure came from (`bundled table 2026-11-24`, `refreshed ...`)."""
        return None if self.estimate is None else self.estimate.table

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu_seconds": round(self.gpu_seconds, 1),
            "node_seconds": None if self.node_seconds is None else round(self.node_seconds, 1),
            "usd_estimate": self.usd,
            "basis": self.basis,
            "prices": self.table,
            "executions": self.executions.as_dict(),
            "uncounted": self.uncounted,
        }

    @property
    def uncounted(self) -> str | None:
        """What the figure leaves out, said rather than hidden: a stopped app's earlier lives."""
        counted = self.executions.recorded or not self.executions.stopped_apps
        return None if counted or self.node_seconds is not None else UNCOUNTED


def tagged_profile(tags: Mapping[str, str]) -> GpuProfile | None:
    """The profile a run's `acagpu:gpu` tag names; None when untagged or unknown."""
    alias = naming.tag_gpu(tags)
    if alias is None:
        return None
    try:
        return resolve_profile(alias)
    except AcaGpuError:
        return None


def execution_seconds(start_time: str | None, end_time: str | None, now: datetime) -> float:
    """One execution's replica life so far, from ARM's own start and end times (UTC): the rule
    `status`, `reap` and the guard (templates/guard, kept equal by tests/unit/test_guard_rules.py)
    share, so one group has one figure."""
    start = naming.parse_iso_utc(start_time or "")
    if start is None:
        return 0.0
    end = naming.parse_iso_utc(end_time or "") or now
    return max(0.0, (end - start).total_seconds())


def _observe(cloud: Cloud, run: Run, now: datetime, age: float) -> tuple[Phase, float, Executions]:
    """(phase, GPU replica-seconds so far, executions) from every app and job in the run's group.
    A kept run's group records what acagpu measured of it (`record.py`): that, and only what
    started after it (an app running now, from the record's time), so nothing counts twice."""
    rg = run.resource_group
    if (run.group.provisioning_state or "").lower() == "deleting":
        return Phase("deleting"), 0.0, Executions()
    kept = record.recorded(run.tags)
    since = None if kept is None else kept[1]
    if since is not None:
        age = min(age, max(0.0, (now - since).total_seconds()))
    seconds, app_states = (kept[0] if kept else 0.0), []
    apps = cloud.list_apps(rg)
    served_app, seen = run.tags.get(naming.TAG_SERVED), 0
    for app in apps:
        if app.name == served_app:  # its replicas' lives from its events (module doc)
            replicas = cloud.list_app_replicas(rg, app.name)
            app_states.append(served_state(replicas))
            served = served_time(cloud, rg, app.name, now.timestamp())
            seconds, seen = seconds + served.seconds, served.replicas
            continue
        if (app.running_status or "").lower() == "stopped" or not app.max_replicas:
            app_states.append("stopped")
            continue
        replicas = cloud.list_app_replicas(rg, app.name)
        running = any(r.running_state == "Running" for r in replicas)
        app_states.append("running" if running else "starting")
        seconds += age if running else 0.0  # an upper bound: from the run's creation
    jobs = tuple((job, tuple(cloud.list_executions(rg, job.name))) for job in cloud.list_jobs(rg))
    found = [e for _, executions in jobs for e in executions]
    environment = None
    if not apps and not jobs:  # a cold run's environment, while it is made (minutes on Azure)
        made = cloud.get_environment(rg, naming.RunNames(run.run_id).environment)
        environment = None if made is None else (made.provisioning_state or "unknown")
    phase = judge(Seen(tuple(app_states), jobs, environment))
    live = [state for state in map(execution_state, found) if state != "ended"]
    seconds += sum(
        execution_seconds(e.start_time, e.end_time, now) for e in found if _after(e.start_time, since)
    )
    counted = Executions(
        live.count("running"), len(found) - len(live), len(apps), app_states.count("stopped"),
        starting=live.count("starting"), shards=phase.shards, recorded=kept is not None,
        served_replicas=seen,
    )  # fmt: skip
    return phase, seconds, counted


def _after(start_time: str | None, since: datetime | None) -> bool:
    """Not yet in the group's record: started after its time. ARM's start is whole seconds, so one
    stamped in the record's own second began before it (or so close that it is missed while it
    runs, and recorded by the command that started it when it ends)."""
    start = naming.parse_iso_utc(start_time or "")
    return since is None or start is None or start > since


def run_spend(cloud: Cloud, run: Run, now: datetime) -> RunSpend:
    """The run's phase and spend so far; reads its app and job only when it is priced serverless."""
    age = age_seconds(run.tags, now) or 0.0
    profile = tagged_profile(run.tags)
    unread: str | None = None
    counted = Executions()
    try:
        seen, gpu_seconds, counted = _observe(cloud, run, now, age)
        phase, detail = seen.name, seen.detail
    except AcaGpuError as exc:
        phase, detail, gpu_seconds, unread = (
            f"unknown ({exc.code or 'error'})",
            None,
            0.0,
            exc.code or "error",
        )
    said = {"phase_detail": detail}
    if profile is None:
        return RunSpend(phase, gpu_seconds, None, None, "unknown GPU", counted, **said)
    node = not profile.serverless
    if unread is not None and not node:
        why = f"unknown: its replicas could not be read ({unread})"
        return RunSpend(phase, gpu_seconds, None, None, why, counted, **said)
    billed = age if node else gpu_seconds
    try:
        estimate = cost.run_spend(profile, billed, run.group.location)
    except AcaGpuError as exc:  # a price table without this profile's meters: no figure, said so
        return RunSpend(phase, gpu_seconds, None, None, f"no price: {exc.message}", counted, **said)
    basis = f"{NODE_BASIS if node else REPLICA_BASIS} so far; {estimate.basis}"
    return RunSpend(phase, gpu_seconds, billed if node else None, estimate, basis, counted, **said)
