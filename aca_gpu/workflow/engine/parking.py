"""Between the sweeps of a `--wait-for-capacity` run: each place kept empty, asked for room with one write.

The first sweep tries every place with the run itself (the engine's failover). A place that refused
for a reason waiting can cure (no capacity, WorkLoad Profile Full) is then *parked* rather than torn
down: billing first, every app and job of the attempt is deleted and verified gone (the teardown's
own first half), and what bills nothing is kept: the attempt's group, its serverless environment
(Consumption profiles bill only running replicas: ACA's billing page) and one capacity probe job.

The probe job is Manual (it starts nothing by itself), one replica, no retry, its `replicaTimeout`
the probe's window, its container a small public image with the GPU profile's resources. Each later
sweep asks every parked place once: one `Jobs_Start` (its only ARM write there), then reads. ACA has
no queue for GPUs: an unplaced job replica waits until `replicaTimeout` ends its execution (what
operators report of GPU capacity, microsoft/azure-container-apps#1579, #1705), so a probe that finds
no room ends by itself, and between sweeps nothing of the run could start a replica. A probe whose
replica is placed (any state past AssigningReplica) is the answer the wait was for: its job is
deleted at once (billing first, and its GPU is free for the run) and the run places there, in the
group and environment it kept. Only if ARM has not ended an unplaced probe `STOP_SLACK_S` past its
window is it stopped (a second write, said in its answer).

Against the emulator the window is emulated time (ARM ends the execution on its scaled clock); the
client waits for ARM's end, and its own backstop is wall time, only ever longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, NotFound, PreflightRefused, QuotaError
from aca_gpu.gpu.profiles import GpuProfile
from aca_gpu.models import Cloud, ContainerDef, EnvInfo, ExecutionInfo, JobSpec
from aca_gpu.output import Progress
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.base.threads import spawn, wait_for
from aca_gpu.workflow.engine import capacity, executions, waiting
from aca_gpu.workflow.engine.outcome import TeardownResult
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.replicas import replica_details
from aca_gpu.workflow.engine.task_records import PLACING
from aca_gpu.workflow.engine.teardown import teardown_group

# Microsoft's own sample image for ACA jobs (the jobs quickstart): small, public, exits by itself
PROBE_IMAGE = "mcr.microsoft.com/k8se/quickstart-jobs:latest"
WINDOW_MIN_S = 60  # the least a probe is given to be placed (ACA's placements take minutes)
WINDOW_MAX_S = 600  # ... and the most: a longer wait is more sweeps, not a longer probe
STOP_SLACK_S = 120.0  # past its window, a probe ARM has not ended is stopped by the client
LOOK_S = (0.5, 5.0)  # the first look at a probe's execution, and the longest pause between looks


def window_s(start_timeout_s: float) -> int:
    """How long a probe may wait to be placed: the start timeout, within 1 to 10 minutes."""
    return int(min(WINDOW_MAX_S, max(WINDOW_MIN_S, start_timeout_s)))


def probe_container(profile: GpuProfile) -> ContainerDef:
    return ContainerDef(
        name="gpu-room",
        image=PROBE_IMAGE,
        cpu=float(profile.container_cpu),
        memory=checks.memory_text(profile),
    )


@dataclass
class Parked:
    """A place kept empty between sweeps: its attempt's plan (same group, same names) and probe job."""

    region: str
    gpu: str | None  # the place's GPU as the engine names it (None: the plan's first)
    profile_type: str
    plan: Plan
    spec: JobSpec  # its probe job

    @property
    def resource_group(self) -> str:
        return self.plan.names.resource_group


@dataclass
class Answer:
    """What one probe said: placed (room), refused (the platform's words), or nothing (broken)."""

    parked: Parked | None = None  # None: a place asked on its own (wait_for_room)
    placed: bool = False
    refusal: AcaGpuError | None = None  # typed by waiting.reason_of
    broken: AcaGpuError | None = None  # the probe itself failed: the place gets a full attempt
    execution: str | None = None
    writes: int = 0  # ARM writes this answer cost (the start; a stop or delete when one was needed)
    seen: list[str] = field(default_factory=list)

    def as_dict(self, gpu: str) -> dict[str, Any]:
        answer = "room" if self.placed else "probe-failed"
        if self.refusal is not None:
            answer = waiting.reason_of(self.refusal)
        return {
            "region": self.parked.region if self.parked else None,
            "gpu": gpu,
            "answer": answer,
            "writes": self.writes,
            "execution": self.execution,
        }


def probe_spec(
    name: str, rg: str, location: str, env_id: str, profile_name: str, profile: GpuProfile,
    tags: Mapping[str, str], start_timeout_s: float,
) -> JobSpec:  # fmt: skip
    """The probe job: Manual, one replica, no retry, its window as its replica timeout."""
    return JobSpec(
        resource_group=rg,
        name=naming.validate_aca_name(name, "job"),
        location=location,
        environment_id=env_id,
        workload_profile_name=profile_name,
        container=probe_container(profile),
        tags=tags,
        replica_timeout_s=window_s(start_timeout_s),
        retry_limit=0,
    )


def _placed(info: ExecutionInfo) -> bool:
    """Its replica got a node: while it runs, a state past AssigningReplica; once ended, success or a
    container's own exit code (an unplaced replica ended by its timeout has none)."""
    if info.finished:
        return info.status == "Succeeded" or any(code >= 0 for code in info.exit_codes)
    return any(state not in (*PLACING, "Terminated") for state in info.states)


def ask(cloud: Cloud, spec: JobSpec, waiter: Waiter, parked: Parked | None = None) -> Answer:
    """One start of a probe job, then reads until it is placed or ARM ends it unplaced."""
    answer = Answer(parked)
    rg, job, window = spec.resource_group, spec.name, float(spec.replica_timeout_s)
    if waiter.cancel.is_set():
        return answer
    token = executions.new_token()
    try:
        answer.writes += 1
        started = executions.start_marked(cloud, rg, job, [spec.container], token, waiter.cancel)
    except AcaGpuError as exc:
        answer.broken = exc
        return answer
    answer.execution = started.execution
    backstop = time.monotonic() + window + STOP_SLACK_S
    pause = LOOK_S[0]
    while not waiter.cancel.is_set():
        info = executions.get(cloud, rg, job, started.execution)
        with suppress(AcaGpuError):
            replicas = cloud.list_execution_replicas(rg, job, started.execution)
            answer.seen.extend(d for d in replica_details(replicas) if d not in answer.seen)
        if info is not None and _placed(info):
            answer.placed = True
            answer.writes += _release(cloud, rg, job)
            return answer
        if info is not None and info.finished:
            break
        if time.monotonic() >= backstop:
            with suppress(AcaGpuError):  # ARM did not end it: the client does (billing first)
                cloud.stop_execution(rg, job, started.execution)
                answer.writes += 1
            break
        waiter.cancel.wait(pause)
        pause = min(pause * 2, LOOK_S[1])
    if waiter.cancel.is_set():
        return answer
    words = capacity.evidence(answer.seen) or answer.seen[-1:] or ["its replica stayed in AssigningReplica"]
    answer.refusal = QuotaError(
        f"no GPU capacity: the probe execution {started.execution} was never placed in {window:.0f}s "
        f"({'; '.join(words)})",
        code=capacity.CODE,
    )
    return answer


def _release(cloud: Cloud, rg: str, job: str) -> int:
    """The probe found room: its job goes now (its replica stops billing, its GPU is the run's); a
    delete that fails is left to the run's teardown, which deletes every job of the group."""
    with suppress(NotFound, AcaGpuError):
        cloud.delete_job(rg, job)
    return 1


def ask_all(cloud: Cloud, places: Sequence[Parked], waiter: Waiter) -> list[Answer]:
    """Every parked place asked at once (one start each), answers in the places' order."""
    futures = [spawn(partial(ask, cloud, p.spec, waiter, p), "acagpu-room") for p in places]
    answers: list[Answer] = []
    for place, future in zip(places, futures, strict=True):
        try:
            answers.append(wait_for(future))
        except AcaGpuError as exc:
            answers.append(Answer(place, broken=exc))
        except Exception as exc:  # a programming or SDK error: that place gets a full attempt
            answers.append(
                Answer(place, broken=AcaGpuError(f"unexpected failure: {type(exc).__name__}: {exc}"))
            )
    return answers


def wait_for_room(
    cloud: Cloud, spec: JobSpec, wait: waiting.CapacityWait, gpu: str, profile_type: str,
    progress: Progress, waiter: Waiter,
) -> int:  # fmt: skip
    """Ask one place for room until it has some (the number of asks), each ask one start of `spec`
    (made here once, deleted in the end whatever happens); at the bound `wait.error` (exit 3), on
    Ctrl-C a KeyboardInterrupt. What `env create` and `serve` wait with."""
    if cloud.get_job(spec.resource_group, spec.name) is None:
        cloud.create_job(spec)
    placed = False
    try:
        while True:
            began = time.time()
            answer = ask(cloud, spec, waiter)
            if waiter.cancel.is_set():
                raise KeyboardInterrupt
            wait.asked(began, [{**answer.as_dict(gpu), "region": spec.location}])
            if answer.broken is not None:
                raise answer.broken
            if answer.placed:
                placed = True  # its job went with the answer (billing first)
                waiting.placed(wait, spec.location, gpu, profile_type, None)
                return len(wait.asks)
            assert answer.refusal is not None
            wait.saw(spec.location, gpu, profile_type, answer.refusal)
            if not wait.pause(gpu, progress, waiter.cancel):
                if waiter.cancel.is_set():
                    raise KeyboardInterrupt
                raise wait.error(gpu)
    finally:
        if not placed:
            with suppress(AcaGpuError):
                cloud.delete_job(spec.resource_group, spec.name)


class Parks:
    """What an ACA runtime does for a wait: park a place, ask the parked ones, release one."""

    cloud: Cloud
    waiter: Waiter
    env: EnvInfo | None
    _parking: bool

    remove_place: Callable[[Plan, Progress], TeardownResult]  # the runtime's own teardown
    _where: Callable[[Plan, Pair], Any]  # the runtime's: where the run's jobs go

    def park_place(self, plan: Plan, progress: Progress) -> JobSpec | None:
        """Billing first, the attempt's apps and jobs go (this runtime's own teardown, stopped before
        the group delete); its group and serverless environment stay, with the capacity probe job.
        The probe job, or None when the place cannot be kept at $0 (a dedicated profile's
        node bills) or that failed: the engine then removes it as any region it leaves."""
        if self.env is None or not plan.pairs or plan.dedicated:
            return None
        self._parking = True
        try:
            result = self.remove_place(plan, progress)
        finally:
            self._parking = False
        if result.status != "parked" or not result.billing_stopped:
            return None
        where = self._where(plan, plan.pairs[0])
        spec = probe_spec(
            f"gpu-room-{plan.run_id}", where.resource_group, plan.location, where.environment_id,
            where.profile_name, plan.pairs[0].profile, where.tags, plan.start_timeout_s,
        )  # fmt: skip
        try:
            self.cloud.create_job(spec)
        except AcaGpuError:
            return None
        return spec

    def ask_parked(self, places: Sequence[Parked], waiter: Waiter) -> list[Answer]:
        """Each parked place asked for room at once: one start of its probe job each."""
        return ask_all(self.cloud, places, waiter)

    def release_parked(self, place: Parked) -> TeardownResult:
        """A parked place no longer waited on: its group goes (the probe job first, billing first)."""
        try:
            return teardown_group(
                self.cloud,
                place.resource_group,
                wait_gone=place.plan.wait_gone,
                poll=max(0.05, self.waiter.interval),
            )
        except PreflightRefused as exc:
            return TeardownResult("incomplete", message=exc.message)
