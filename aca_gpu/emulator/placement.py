"""Where a job replica's placement can go wrong: GPU quota, and the platform failures a fan-out must
tell from its user's own (microsoft/azure-container-apps#1511, #1579, #1705, #1763, #1809; GPU quota
per environment: Microsoft Learn, "Quotas for Azure Container Apps"; issue: one execution per shard).

- GPU quota is taken when a replica is placed, not when it is asked for: a replica whose GPUs would
  take its region past a `quota:limit=N` waits in AssigningReplica until a GPU frees up or its
  execution's deadline passes (that Azure waits rather than fails is UNCONFIRMED). Usages count
  placed replicas only.
- Faults, each drawn per replica (`rate=` with the spec's `seed=`), jobs only:
  `backoff` ends the execution Failed/BackoffLimitExceeded when its placement comes due, before any
  pull (#1511: AssigningReplica, SuccessfulCreate, then BackoffLimitExceeded; #1809 saw it 2 s
  after scheduling, the emulator's assignment takes its usual few seconds);
  `pull_stall` (`seconds=`, default 86400) holds the replica in PullingImage that long (the
  execution's deadline usually ends it first);
  `lost` (`after=` emulated seconds of running, default 30) kills a running container and ends its
  execution Degraded, reason ReplicaLost (what Azure answers for a lost node is UNCONFIRMED);
  `unknown` and `processing` (`seconds=`, default 60) make a new execution read status Unknown or
  Processing that long before Running (UNCONFIRMED: when Azure answers either is not documented; the
  recordings show Running from the start).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from aca_gpu.emulator import catalog
from aca_gpu.emulator.state import Execution, Job, Replica, State, key

if TYPE_CHECKING:
    from aca_gpu.emulator.runtime import Runtime

LOST_MESSAGE = "The replica was lost while running (its node went away); no exit code was reported."


def _location(state: State, rep: Replica) -> str:
    env = state.envs.get(key(rep.env_rg, rep.env))
    return env.location if env is not None else ""


def placed(rep: Replica) -> bool:
    """Holding its GPUs: assigned to a node and not yet gone."""
    return not rep.gone and rep.phase != "AssigningReplica"


class GpuBudget:
    """GPUs placed per (region, profile type), counted once per tick and kept as replicas are placed."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.used: Counter[tuple[str, str]] = Counter()
        for rep in runtime.state.replicas():
            if placed(rep):
                self.used[(_location(runtime.state, rep), rep.profile_type)] += catalog.gpus(rep.profile_type)

    def admit(self, rep: Replica) -> bool:
        """May this replica be placed now? (Then its GPUs count as used.)"""
        gpus = catalog.gpus(rep.profile_type)
        if not gpus:
            return True
        where = (_location(self.runtime.state, rep), rep.profile_type)
        limit = self.runtime.faults.quota_limit(*where)
        if limit is not None and self.used[where] + gpus > limit:
            if not rep.details:
                rep.details = "Waiting for GPU quota: the region's GPUs of this type are all in use"
            return False
        if rep.details.startswith("Waiting for GPU quota"):
            rep.details = ""
        self.used[where] += gpus
        return True


def _fire(runtime: Runtime, kind: str, rep: Replica) -> float | None:
    """The fault's number parameter when `kind` fires for this job replica (`pull_stall` also for an
    app's: a served app's pull that never ends), else None."""
    if rep.kind != "job" and not (kind == "pull_stall" and rep.kind == "app"):
        return None
    fault = runtime.faults.fire(
        kind, path=rep.name, location=_location(runtime.state, rep), profile=rep.profile_type
    )
    if fault is None:
        return None
    name, default = {"pull_stall": ("seconds", "86400"), "lost": ("after", "30")}.get(kind, ("", "0"))
    return float(fault.param(name, default)) if name else 0.0


def backoff_before_pull(runtime: Runtime, rep: Replica) -> bool:
    """`backoff`: the replica ends without a container; its execution fails BackoffLimitExceeded."""
    if _fire(runtime, "backoff", rep) is None:
        return False
    rep.phase = "Terminated"
    rep.exit_code = None
    rep.restart_count = (rep.retry_limit or 0) + 1
    rep.details = "BackoffLimitExceeded"
    runtime.emit_replica(
        rep, "BackoffLimitExceeded", "Job has reached the specified backoff limit", "Warning"
    )
    return True


def pull_seconds(runtime: Runtime, rep: Replica, seconds: float) -> float:
    """The pull's emulated seconds, or the `pull_stall` fault's much longer ones."""
    stalled = _fire(runtime, "pull_stall", rep)
    return seconds if stalled is None else max(seconds, stalled)


def mark_if_lost(runtime: Runtime, rep: Replica) -> None:
    """`lost`, drawn when a job container starts: the monotonic time its node goes away."""
    after = _fire(runtime, "lost", rep)
    rep.lost_at = None if after is None else runtime.clock.after_seconds(after)


def lose(runtime: Runtime, rep: Replica) -> None:
    """The node went away under a running replica: its execution ends Degraded, no exit code."""
    job = runtime.state.jobs.get(key(rep.rg, rep.owner))
    ex = job.executions.get(rep.parent) if job is not None else None
    rep.lost_at = None
    rep.exit_code = None
    runtime.emit_replica(rep, "ReplicaLost", LOST_MESSAGE, "Warning")
    if job is None or ex is None:
        runtime.stop_replica(rep)
        return
    runtime.finish_execution(job, ex, "Degraded", reason="ReplicaLost", message=LOST_MESSAGE)


def mark_reported(runtime: Runtime, job: Job, ex: Execution) -> None:
    """`unknown` and `processing`, drawn once per execution at its start."""
    for kind, shown in (("unknown", "Unknown"), ("processing", "Processing")):
        fault = runtime.faults.fire(kind, path=ex.name, location=job.location, profile=job.profile_type)
        if fault is not None:
            ex.reported = (shown, runtime.clock.after_seconds(float(fault.param("seconds", "60"))))
            return


def shown_status(runtime: Runtime, ex: Execution) -> str:
    """The status an execution answers: an `unknown`/`processing` fault's while it holds, else its own
    (recorded: Running from the start until the execution ends, even after its replica exited)."""
    if ex.reported is not None and ex.status == "Running" and runtime.clock.now() < ex.reported[1]:
        return ex.reported[0]
    return ex.status
