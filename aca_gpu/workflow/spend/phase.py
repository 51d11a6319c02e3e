"""Where a run is now, as a second shell sees it from ARM alone: the phase `status` shows.

The run's own process knows its plan; `acagpu status` in another shell knows only what ARM lists in
the run's group: its environment (a cold run's), its apps and jobs, and each execution's status and
containers (`detailedStatus`). That is enough to say that a run is going, and how far:

- a cold run's environment still provisioning is `building` (minutes on Azure), not `empty`;
- an execution whose container is not running yet (placement, image pull) is `starting`, one whose
  container runs is `running`;
- a served app is `serving` while a replica runs, `scaled-to-zero` between requests;
- a fan-out's job carries its shard count (tag `acagpu:shards`), so between its rounds, when no
  execution is live, the shards not started yet are `queued` and the run is not `ended`.

Every phase is listed, with what it means, in docs/cost-safety.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aca_gpu import naming
from aca_gpu.models import ExecutionInfo, JobInfo, ReplicaInfo

SHARD_INDEX = "ACAGPU_SHARD_INDEX"  # in each shard execution's template env (docs/fanout.md)
READY = "succeeded"
TERMINATED = "Terminated"  # detailedStatus' word for a container that ran and exited


def execution_state(execution: ExecutionInfo) -> str:
    """`ended`, `running` (a container of it runs) or `starting` (not placed, pulling, creating).
    An execution whose every container has terminated is ended too: ARM keeps it `Running` a few
    seconds after its container exits (recorded), and that shard's work is done, not starting."""
    if execution.finished:
        return "ended"
    if "Running" in execution.states:
        return "running"
    exited = bool(execution.states) and all(s == TERMINATED for s in execution.states)
    return "ended" if exited else "starting"


SERVING, AT_ZERO = "serving", "scaled-to-zero"


def served_state(replicas: Sequence[ReplicaInfo]) -> str:
    """A served app's state: `serving` while a replica runs, `starting` while one is placed or pulls
    (a request woke it), `scaled-to-zero` with none: an app at zero waits for a request and bills
    nothing; it is not starting."""
    if any(r.running_state == "Running" for r in replicas):
        return SERVING
    return "starting" if replicas else AT_ZERO


@dataclass(frozen=True)
class Seen:
    """What one look at a run's group found (`so_far._observe` reads it while pricing the run)."""

    # each app: "running", "starting" or "stopped"; a served app "serving", "starting" or "scaled-to-zero"
    app_states: tuple[str, ...] = ()
    jobs: tuple[tuple[JobInfo, tuple[ExecutionInfo, ...]], ...] = ()
    environment: str | None = None  # a cold run's environment's provisioning state, when it was read


@dataclass(frozen=True)
class Phase:
    name: str
    detail: str | None = None
    shards: dict[str, int] | None = None  # a fan-out's shards by state: total, queued, ...


def shard_counts(job: JobInfo, executions: Sequence[ExecutionInfo]) -> dict[str, int] | None:
    """A fan-out job's shards by their latest state (None for any other job): a shard with a live
    execution is starting or running, one with only ended ones ended, one with none queued."""
    try:
        total = int(job.tags.get(naming.TAG_SHARDS, ""))
    except ValueError:
        return None
    by_index: dict[str, set[str]] = {}
    for execution in executions:
        index = execution.env.get(SHARD_INDEX)
        if index is not None:
            by_index.setdefault(index, set()).add(execution_state(execution))
    counts = {"total": total, "queued": 0, "starting": 0, "running": 0, "ended": 0}
    for states in by_index.values():
        for state in ("running", "starting", "ended"):
            if state in states:
                counts[state] += 1
                break
    counts["queued"] = max(0, total - len(by_index))
    return counts


def judge(seen: Seen) -> Phase:
    """The one phase of a run's group (see the module's docstring; `deleting` and `unknown (...)` are
    said by the caller, before or instead of a look)."""
    executions = [e for _, found in seen.jobs for e in found]
    states = [execution_state(e) for e in executions] + list(seen.app_states)
    shards = None
    for job, found in seen.jobs:
        counted = shard_counts(job, found)
        if counted is not None:
            shards = counted if shards is None else {k: shards[k] + v for k, v in counted.items()}
    detail = _shards_text(shards) if shards is not None else None
    if "running" in states:
        return Phase("running", detail, shards)
    if SERVING in states:
        return Phase(SERVING)
    if "starting" in states:
        return Phase("starting", detail, shards)
    if shards is not None and shards["queued"]:
        return Phase("queued", detail, shards)  # between a fan-out's rounds, or before its first
    if AT_ZERO in states:
        return Phase(AT_ZERO)  # a served app between requests (past its cooldown)
    if seen.app_states:
        return Phase("stopped")  # a kept run between smi/exec uses
    if executions:
        return Phase("ended", detail, shards)
    if seen.jobs:
        return Phase("building", "jobs made, none started yet")
    if seen.environment is not None:
        if seen.environment.lower() == READY:
            return Phase("idle", "environment ready, no job in it")
        return Phase("building", f"environment {seen.environment}")
    return Phase("empty")


def _shards_text(shards: dict[str, int]) -> str:
    shown = " · ".join(f"{k} {shards[k]}" for k in ("queued", "starting", "running", "ended") if shards[k])
    return f"shards {shards['total']}: {shown or 'none'}"
