"""A fan-out's place and its one job: the engine's Runtime with the shards as the tester's work.

The engine runs a fan-out like any plan: preflight, the place (the run's own group and environment,
or a warm one's), the work, teardown in `finally`, Ctrl-C handled once. The work is one Manual job
(`parallelism` 1, `replicaRetryLimit` 0: a shard's retries are acagpu's, each a new execution with
its own attempt number) and the `TaskRunner` driving one execution per shard attempt. Preflight
clamps P to the GPU quota that is free (said in its step) and refuses a quota of 0 GPUs, which no
P can use. On Ctrl-C the runner stops every running shard before the engine tears down.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, QuotaError, WaitTimedOut
from aca_gpu.models import Cloud, EnvInfo, ResourceGroupInfo
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import capacity
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime, Where
from aca_gpu.workflow.engine.lifetime import Lifetime
from aca_gpu.workflow.engine.outcome import TesterOutcome
from aca_gpu.workflow.engine.pacing import TokenBucket, bucket_of
from aca_gpu.workflow.engine.phases import container_times
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.replicas import shared_in
from aca_gpu.workflow.engine.task_records import Task, TaskState
from aca_gpu.workflow.engine.task_runner import Deadlines, TaskRunner
from aca_gpu.workflow.engine.tester_run import TesterRun, ensure_job
from aca_gpu.workflow.env import shares
from aca_gpu.workflow.env.find import find_env
from aca_gpu.workflow.fanout.backend import AcaShards
from aca_gpu.workflow.fanout.clamp import read_clamp
from aca_gpu.workflow.fanout.live import Board
from aca_gpu.workflow.fanout.spec import RESULTS_SHARE, FanoutSpec
from aca_gpu.workflow.workload.aca import AcaWorkloadRuntime, WarmWorkloadRuntime, Workload, job_spec
from aca_gpu.workflow.workload.follow import LOGS_WAIT_S
from aca_gpu.workflow.workload.outcome import Console

EVENTS_TAIL = 300  # the most the event stream gives (tailLines 0-300): a shard's ~8 events, ~35 shards


class _Follower(Workload):
    """`acagpu run`'s own log follower, for one shard attempt (its console prefixes `[k]`)."""

    def __init__(self, cloud: Cloud, console: Any) -> None:
        self.cloud, self.console = cloud, console
        self._lock = threading.Lock()
        self._testers = []


class Fanout:
    """The shards in place of the tester (mixed into the cold or the warm workload runtime)."""

    cloud: Cloud
    fanout: FanoutSpec
    board: Board
    bucket: TokenBucket | None
    waiter: Waiter
    _where: Any

    def _fanout_init(self, fanout: FanoutSpec, board: Board, tick_s: float) -> None:
        self.fanout, self.board, self.tick_s = fanout, board, tick_s
        self.limit = fanout.parallel
        self.clamp: dict[str, Any] | None = None
        self.states: list[TaskState] = []
        self.runner: TaskRunner | None = None
        self.done = threading.Event()
        self.job_name: str | None = None
        self.bucket = None
        self.results_made: shares.Made | None = None
        self.followers: list[threading.Thread] = []  # each shard attempt's log follower
        self.gpu_shared: list[str] = []  # the emulator's word that shards shared a host GPU

    # -- preflight: P against the GPU quota -------------------------------------------------------
    def clamp_parallel(self, plan: Plan, progress: Progress) -> None:
        place = getattr(self, "place", None)
        group = getattr(self, "group", None)
        where = (
            (group, place) if isinstance(place, EnvInfo) and isinstance(group, ResourceGroupInfo) else None
        )
        with progress.step("parallel shards (GPU quota)") as step:
            clamp = read_clamp(self.cloud, plan, self.fanout.parallel, where)
            step.update(clamp.said)
            self.clamp = clamp.doc
            if clamp.refusal is not None:
                step.status = "fail"
                raise clamp.refusal
            self.limit = clamp.parallel

    # -- the work ---------------------------------------------------------------------------------
    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        try:
            return self._run_shards(plan, pair, waiter)
        finally:
            self.done.set()

    def _run_shards(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        where: Where = self._where(plan, pair)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the job was created", code="Cancelled")
        job = job_spec(self.fanout.job_run(), plan, pair, where)
        # how many shards it starts: `status` in another shell counts those not started yet as queued
        job = replace(job, tags={**job.tags, naming.TAG_SHARDS: str(len(self.fanout.indexes))})
        self.job_name = job.name
        ensure_job(self.cloud, job)
        AcaRuntime._not_cancelled(waiter, job.name)  # a create answered after Ctrl-C starts nothing
        self._make_result_folders()
        self.streams: dict[str, TesterRun] = {}
        backend = AcaShards(
            self.cloud,
            where.resource_group,
            job,
            on_started=lambda task, attempt, name: self._follow_shard(
                plan, where, job.name, task, name, waiter
            ),
            streams=self.streams,
            cancel=waiter.cancel,
        )
        self.bucket = bucket_of(self.cloud)
        self.runner = TaskRunner(
            backend,
            self.fanout.tasks(),
            limit=self.limit,
            policy=self.fanout.policy,
            deadlines=Deadlines(start_s=plan.start_timeout_s, tick_s=self.tick_s),
            bucket=self.bucket,
            cancel=waiter.cancel,
            on_change=self.board.changed,
            on_look=self.board.looked,
            cap=plan.spend_cap,
        )
        self.states = self.board.states = self.runner.states
        ticking = threading.Event()

        def tick() -> None:
            while not ticking.wait(1.0):
                self.board.tick()

        threading.Thread(target=tick, name="acagpu-board", daemon=True).start()
        try:
            self.runner.run()
        finally:
            ticking.set()
        if not waiter.cancel.is_set():
            self._lines_read(waiter)
        events = self._shard_events(where)
        self.gpu_shared = shared_in(events or [], job.name)
        self._container_times(events, job.name)
        failed = [s.task.index for s in self.states if s.state != "succeeded"]
        if waiter.cancel.is_set():
            raise WaitTimedOut("shards stopped: cancelled", code="Cancelled")
        attempts = [a for s in self.states for a in s.attempts]
        if (
            plan.wait_for_capacity_s is not None
            and attempts
            and all(a.running is None and (a.reason or "").startswith("NeverPlaced") for a in attempts)
        ):  # not one shard was ever placed here: a place without capacity, which a sweep waits out
            raise QuotaError(
                f"no GPU capacity: none of {len(self.states)} shards was ever placed "
                f"({len(attempts)} attempts)",
                code=capacity.CODE,
            )
        return TesterOutcome(
            "pass" if not failed else "fail",
            reason=None if not failed else f"{len(failed)} shard(s) failed",
            seconds=sum(s.gpu_seconds for s in self.states),
        )

    def _make_result_folders(self) -> None:
        """--output-dir: every shard's folder on the results share, made before any shard starts
        (a container writes into $ACAGPU_OUTPUT_DIR as it is; a mount does not make folders)."""
        made = getattr(self, "results_made", None)
        group = getattr(self, "group", None)
        if self.fanout.output_dir is None or made is None or group is None:
            return
        folders = [self.fanout.share_folder(k) for k in self.fanout.indexes]
        self.cloud.make_share_folders(group.name, made.account, RESULTS_SHARE, folders)

    def _lines_read(self, waiter: Waiter) -> None:
        """Every shard has ended: its lines are in before the document is made. A stream that fell
        short is read from Log Analytics, which has them 20 s to 3 min later: said, and bounded."""
        followers = [t for t in self.followers if t.is_alive()]
        if not followers:
            return
        grace = time.monotonic() + 1.0  # most end within a moment of their execution: one second for all
        for thread in followers:
            thread.join(timeout=max(0.0, grace - time.monotonic()))
            if waiter.cancel.is_set():
                return
        late = [t for t in followers if t.is_alive()]
        if not late:
            return
        self.board.print_line(
            "stderr",
            f"reading the lines of {len(late)} shard(s) from Log Analytics, where they arrive 20 s to "
            f"3 min after the container (waiting up to {LOGS_WAIT_S:.0f} s; Ctrl-C stops)",
        )
        ends = time.monotonic() + LOGS_WAIT_S + 30
        for thread in late:
            while thread.is_alive() and time.monotonic() < ends and not waiter.cancel.is_set():
                thread.join(timeout=0.25)

    def _follow_shard(
        self, plan: Plan, where: Where, job: str, task: Task, execution: str, waiter: Waiter
    ) -> None:
        """The shard's lines from its start (a short container's too), in a thread of its own."""
        if self.fanout.logs == "none":
            return  # nothing to show or keep: no stream held open per shard
        console = self.board.console(task.index)
        follower = _Follower(self.cloud, console)
        run = TesterRun(execution=execution)
        self.streams[execution] = run  # its stream's start and end are the attempt's life (task_records.py)

        def follow() -> None:
            # cancelled or lost: the shard's state comes from its execution, not from its log
            with contextlib.suppress(AcaGpuError):
                follower._follow(plan, where, job, run, waiter)

        thread = threading.Thread(target=follow, name=f"acagpu-log-{task.index}", daemon=True)
        self.followers.append(thread)  # (list.append is atomic: starts answer in several threads)
        thread.start()

    # -- billing ----------------------------------------------------------------------------------
    def _shard_events(self, where: Where) -> list[dict[str, Any]] | None:
        """The environment's last system events, read once every shard has ended (None when they
        could not be read): whether shards shared a host GPU, and each one's container times."""
        try:
            return self.cloud.system_events(
                where.environment_group, environment=where.environment, tail=EVENTS_TAIL
            )
        except AcaGpuError:
            return None

    def _container_times(self, events: list[dict[str, Any]] | None, job: str) -> None:
        """Each attempt's container start and end by the platform's events: they stand in where a
        fault cost the client its own evidence (`Attempt.lifetime`), as a run's do. A figure they
        were wanted for and could not give says why."""
        attempts = [a for s in self.states for a in s.attempts if a.execution]
        times = container_times(events or [], job, [a.execution for a in attempts if a.execution])
        for attempt in attempts:
            attempt.events = times.get(attempt.execution or "")
            if attempt.events is not None:
                continue
            attempt.events_missing = (
                "the platform's events, which would stand in, could not be read"
                if events is None
                else f"the platform's events (the environment's last {EVENTS_TAIL}), which would "
                "stand in, do not give its container's start and end"
            )

    def shard_gpu_seconds(self) -> float:
        return sum(s.gpu_seconds for s in self.states)

    def shard_lives(self) -> list[tuple[str, Lifetime]]:
        """Each shard attempt's figure and how it was known (`engine/lifetime.py`)."""
        return [
            (f"shard {s.task.index} attempt {a.number}", a.lifetime)
            for s in self.states
            for a in s.attempts
            if a.running is not None
        ]

    def end_attempts(self) -> None:
        """Teardown's job delete stops whatever still runs: nothing of it bills after this."""
        now = time.monotonic()
        for state in self.states:
            for attempt in state.attempts:
                attempt.ended = attempt.ended or now


@contextlib.contextmanager
def quota_refusal_first(runtime: Fanout, plan: Plan, progress: Progress) -> Iterator[None]:
    """The runtime's own preflight (provider, profile, one GPU free now), then P against the quota.
    A quota of 0 GPUs is bad input that no P can fix (exit 2), said before the runtime's "no GPU
    free now" (exit 3), which waiting or another region may fix."""
    try:
        yield
    except QuotaError:
        runtime.clamp_parallel(plan, progress)  # raises PreflightRefused when the quota is 0
        raise
    runtime.clamp_parallel(plan, progress)


class ColdFanoutRuntime(Fanout, AcaWorkloadRuntime):
    """The run's own group and environment (no --env), torn down after."""

    def __init__(self, cloud: Cloud, waiter: Waiter, fanout: FanoutSpec, console: Console, board: Board,
                 tick_s: float) -> None:  # fmt: skip
        AcaWorkloadRuntime.__init__(self, cloud, waiter, fanout.run, console)
        self._fanout_init(fanout, board, tick_s)

    def preflight(self, plan: Plan, progress: Progress) -> None:
        with quota_refusal_first(self, plan, progress):
            AcaWorkloadRuntime.preflight(self, plan, progress)

    def remove_place(self, plan: Plan, progress: Progress) -> Any:
        try:
            return AcaWorkloadRuntime.remove_place(self, plan, progress)
        finally:
            self.end_attempts()

    def gpu_seconds(self) -> float:
        return AcaWorkloadRuntime.gpu_seconds(self) + self.shard_gpu_seconds()

    def gpu_lives(self) -> list[tuple[str, Lifetime]]:
        return AcaWorkloadRuntime.gpu_lives(self) + self.shard_lives()


class WarmFanoutRuntime(Fanout, WarmWorkloadRuntime):
    """Inside a warm environment: the run brings only its job; the environment is untouched."""

    def __init__(self, cloud: Cloud, waiter: Waiter, group: ResourceGroupInfo, env: EnvInfo,
                 fanout: FanoutSpec, console: Console, board: Board, tick_s: float) -> None:  # fmt: skip
        WarmWorkloadRuntime.__init__(self, cloud, waiter, group, env, fanout.run, console)
        self._fanout_init(fanout, board, tick_s)

    def preflight(self, plan: Plan, progress: Progress) -> None:
        with quota_refusal_first(self, plan, progress):
            WarmWorkloadRuntime.preflight(self, plan, progress)
        if self.fanout.output_dir is None:
            return
        with progress.step("results share (kept with the environment)") as step:
            self.results_made = shares.ensure(
                self.cloud,
                env_name=plan.env or "",
                resource_group=self.group.name,
                environment=self.place.name,
                location=self.group.location,
                group_tags=dict(self.group.tags),
                shares=[RESULTS_SHARE],
                say=step.update,
            )
            step.update(f"{RESULTS_SHARE} in {self.results_made.account}, folder {self.fanout.share_subdir}/")

    def remove_place(self, plan: Plan, progress: Progress) -> Any:
        try:
            return WarmWorkloadRuntime.remove_place(self, plan, progress)
        finally:
            self.end_attempts()

    def gpu_seconds(self) -> float:
        return WarmWorkloadRuntime.gpu_seconds(self) + self.shard_gpu_seconds()

    def gpu_lives(self) -> list[tuple[str, Lifetime]]:
        return WarmWorkloadRuntime.gpu_lives(self) + self.shard_lives()


def fanout_runtime_for(
    cloud: Cloud,
    plan: Plan,
    waiter: Waiter,
    fanout: FanoutSpec,
    console: Console,
    board: Board,
    tick_s: float,
) -> tuple[Plan, ColdFanoutRuntime | WarmFanoutRuntime]:
    from aca_gpu.workflow.env.warm_runtime import moved_to

    if plan.env is None:
        return plan, ColdFanoutRuntime(cloud, waiter, fanout, console, board, tick_s)
    group, env = find_env(cloud, plan.env)
    return moved_to(plan, group), WarmFanoutRuntime(cloud, waiter, group, env, fanout, console, board, tick_s)
