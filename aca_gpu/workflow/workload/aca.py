"""The user's container as a job on Azure Container Apps: in the run's own group and environment
(`AcaWorkloadRuntime`), or inside a warm environment (`--env NAME`, `WarmWorkloadRuntime`).

`AcaRuntime`/`WarmRuntime` give preflight (provider, offer, quota), the place and the billing-first
teardown (the whole run-scoped group; in a warm environment the run's own group of jobs); the
`Workload` mixin replaces the tester with the user's job, started as one execution with its own
template (`executions.start`): the image with the command as its
args (as `docker run IMAGE CMD` keeps the entrypoint), `-e` values in the template, `--secret-env`
values as job secrets that env vars reference (`secretRef`), private-registry credentials,
`--mount` shares as AzureFile volumes on the environment's storages (checked before the job
exists), and a replica timeout of --max-minutes (the platform ends it: exit 4). Its log is
followed from the start; a reconnect's replay is skipped by (timestamp, stream, text) counts, so
no line is lost or doubled; what the stream missed (a container that printed and exited before it
could be read) comes from the environment's Log Analytics workspace (follow.py).
The exit code comes from the execution's detailed status; a container that never started is
explained by the platform's own events in one line: an image that could not be pulled
(`ImagePullFailure`, `ErrImagePull`) is ImagePullFailed, exit 2 (the name, tag or access is
wrong) or 7 (the registry could not be reached), also when its pull kept failing until
--max-minutes; a CUDA requirement or another refusal of the image is exit 5. A container that
ran keeps its code, with the platform's reason when it is known (OOMKilled, exit 137).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace

from aca_gpu.errors import AcaGpuError, InfraError, PreflightRefused, WaitTimedOut
from aca_gpu.gpu import cuda_compat, runtime_errors
from aca_gpu.gpu.image_ref import parse_image_ref
from aca_gpu.models import (
    Cloud,
    ContainerDef,
    EnvInfo,
    ExecutionInfo,
    JobSpec,
    RegistryCred,
    ResourceGroupInfo,
)
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine import capacity, executions
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime, Where
from aca_gpu.workflow.engine.outcome import TeardownResult, TesterOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.probe_job import DRIVER_LOOK_S, driver_said
from aca_gpu.workflow.engine.replicas import event_owner, event_reasons, replica_details
from aca_gpu.workflow.engine.single_task import answer, run_execution
from aca_gpu.workflow.engine.task_records import PLATFORM, USER, RetryPolicy, Verdict
from aca_gpu.workflow.engine.tester_run import TesterRun, ensure_job, start_execution
from aca_gpu.workflow.env import shares
from aca_gpu.workflow.env.find import find_env
from aca_gpu.workflow.env.warm_runtime import WarmRuntime, moved_to
from aca_gpu.workflow.preflight import drivers
from aca_gpu.workflow.workload import explain
from aca_gpu.workflow.workload.follow import Followed, follow_execution
from aca_gpu.workflow.workload.local import outcome_of
from aca_gpu.workflow.workload.outcome import Console, WorkloadResult
from aca_gpu.workflow.workload.plan import RunSpec
from aca_gpu.workflow.workload.plan import Workload as UserWorkload

CONTAINER = "main"
REGISTRY_SECRET = "registry-password"
FINAL_STATUS_WAIT_S = 30.0
EVENTS_TAIL = 50  # the environment's last system events read to explain a container's end
EVENTS_KEPT = 12  # ... of which the job's own last distinct ones are kept
INTERRUPT_READ_S = 3.0  # after Ctrl-C, how long the execution is read for how the container ended
STDERR_TAIL = 50  # the container's last stderr lines read to explain its crash
PLACEMENT_LOOK_S = (0.5, 5.0)  # the first look at a new execution's replica, and the longest pause
START_FAILURES = ("ContainerCreateFailure", "ImagePullFailure", "ImagePullBackOff", "ErrImagePull",
                  "ContainerCrashing", "CrashLoopBackOff", "OOMKilled", "ReplicaUnhealthy")  # fmt: skip


# A single run is a task with no retry: the user asked for one container (`--shards` retries)
RUN_RETRY = RetryPolicy(retries=0, platform_retries=0)


def verdict_of(result: WorkloadResult) -> Verdict:
    """How the container's attempt ended, for its task: an exit 0 is the answer; a code of its own,
    a refusal or --max-minutes are the user's; a lost job or end, or no placement, the platform's
    (`error` set: what the run raises, exit 3 or 7)."""
    outcome = outcome_of(result)
    if result.error is not None and result.status in ("gone", "unplaced"):
        code = "NeverPlaced" if result.status == "unplaced" else "JobDeleted"
        return Verdict(PLATFORM, code, result.reason, error=result.error, value=outcome)
    if result.status == "exited" and result.exit_code == 0:
        return Verdict(None, value=outcome)
    whose = USER if result.status in ("exited", "refused", "timeout") else PLATFORM
    return Verdict(whose, result.status, result.reason, result.exit_code, value=outcome)


def workload_parts(
    work: UserWorkload, image: str | None = None, registries: tuple[RegistryCred, ...] = ()
) -> tuple[ContainerDef, dict[str, str], tuple[RegistryCred, ...]]:
    """The user's container and what its pull and its `--secret-env` need, for a job (`run`) and
    an app (`serve`) alike: the container (`image`: a staged copy's name where there is one), the
    secrets by name (the registry's password among them) and the pull's credentials (the
    workload's own registry, else `registries`: a staged copy's identity)."""
    secrets = {name: work.secret_values[env] for env, name in work.secrets.items()}
    if work.registry is not None:
        reg = work.registry
        if reg.identity:
            registries = (RegistryCred(reg.server, identity=reg.identity),)
        elif work.registry_password is not None:
            secrets[REGISTRY_SECRET] = work.registry_password
            registries = (RegistryCred(reg.server, username=reg.username, password_secret=REGISTRY_SECRET),)
    container = ContainerDef(
        name=CONTAINER,
        image=image or work.image,
        cpu=work.cpu,
        memory=work.memory,
        args=work.command,
        env=dict(work.env),
        secret_env=dict(work.secrets),
        mounts=tuple((f"share-{i}", m.path) for i, m in enumerate(work.mounts, start=1)),
    )
    return container, secrets, registries


def job_spec(spec: RunSpec, plan: Plan, pair: Pair, where: Where) -> JobSpec:
    work = spec.workload
    # a registry without an identity has its password read when the plan was made (workload/plan.py)
    assert work.registry is None or work.registry.identity or work.registry_password is not None
    container, secrets, registries = workload_parts(work)
    volumes = tuple((f"share-{i}", m.source) for i, m in enumerate(work.mounts, start=1))
    return JobSpec(
        resource_group=where.resource_group,
        name=pair.tester,
        location=where.location,
        environment_id=where.environment_id,
        workload_profile_name=where.profile_name,
        container=container,
        tags=dict(where.tags),
        replica_timeout_s=plan.tester_timeout_s,
        secrets=secrets,
        registries=registries,
        volumes=volumes,
    )


class Workload:
    """The user's job in place of the tester (mixed into AcaRuntime or WarmRuntime)."""

    cloud: Cloud
    _lock: threading.Lock
    _testers: list[TesterRun]
    spec: RunSpec
    console: Console
    result: WorkloadResult | None
    followed: Followed | None = None  # the lines and where they came from (follow.py)
    current: tuple[str, str, TesterRun] | None = None  # (group, job, execution) being followed
    keeps_console_lines = True  # a cold run's environment sends its lines to Log Analytics too

    def _before_teardown(self) -> None:
        """Ctrl-C ends the wait for the container at once, and teardown deletes its job: what the
        container did (ended with a code, or still running) is read now, while its execution can be."""
        waiter: Waiter | None = getattr(self, "waiter", None)
        if self.result is not None or self.current is None or waiter is None or not waiter.cancel.is_set():
            return
        rg, job, run = self.current
        self.result = self._interrupted(rg, job, run)

    _where: Callable[[Plan, Pair], Where]  # the runtime's: where the run's jobs go

    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        where = self._where(plan, pair)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the job was created", code="Cancelled")
        job = self._staged_copy(job_spec(self.spec, plan, pair, where))
        # A container with mounts runs its job's own template: the spec's execution template has no
        # volumeMounts (docs/emulator.md). The job is this run's, so its template carries the token.
        token = executions.new_token() if job.container.mounts else None
        if token is not None:
            job = replace(job, container=executions.marked([job.container], token)[0])
        reused = ensure_job(self.cloud, job)
        AcaRuntime._not_cancelled(waiter, job.name)  # a create answered after Ctrl-C starts nothing
        rg = where.resource_group

        def start(fresh: str) -> TesterRun:
            """A template of its own with the runner's token; a job with mounts runs its own
            template, which carries the token it was made with (one start: one token)."""
            run = start_execution(
                self.cloud,
                rg,
                job.name,
                resume=reused,
                template=None if token is not None else [job.container],
                own_token=(None if reused else token) if token is not None else fresh,
                cancel=waiter.cancel,
            )
            with self._lock:
                self._testers.append(run)
                self.current = (rg, job.name, run)
            return run

        state = run_execution(
            self.cloud,
            rg,
            job.name,
            start,
            lambda run: self._watch(plan, pair, where, job.name, run, waiter),
            policy=RUN_RETRY,
            cancel=waiter.cancel,
            label=f"the container's job {job.name}",
            settle_s=INTERRUPT_READ_S + 1.0,  # Ctrl-C: what the container did is read before its stop
            cap=plan.spend_cap,
        )
        outcome: TesterOutcome = answer(state, waiter.cancel)
        return outcome

    def _watch(
        self, plan: Plan, pair: Pair, where: Where, job: str, run: TesterRun, waiter: Waiter
    ) -> Verdict:
        """The container's one attempt, followed to its end and judged (see the module doc)."""
        rg = where.resource_group
        placement = self._watch_placement(rg, job, run)
        too_old = self._watch_driver(where, pair, job, run, waiter)
        try:
            self._follow(plan, where, job, run, waiter)
        except WaitTimedOut as exc:
            if exc.code == "Cancelled":  # Ctrl-C: the document still says what the container did
                self.result = self.result or self._interrupted(rg, job, run)
            raise
        finally:
            run.ended = run.ended or time.monotonic()
        info = self._final_status(rg, job, run, waiter)
        # read before the verdict: the container's run by the platform's events stands in for a
        # figure a fault spoiled (engine/lifetime.py), and the verdict carries the figure
        phases = getattr(self, "_phases")(where, job, [run])  # noqa: B009 - AcaRuntime's, mixed in
        self.result = self._judge(plan, where, job, run, info, placement)
        if too_old and self.result.status != "exited":  # stopped before its container started
            self.result = self._never_ran(run, explain.Explained(*too_old[0]))
        if phases:  # how the image arrived, in the platform's words
            self.result = replace(self.result, platform=phases)
        return verdict_of(self.result)

    def _interrupted(self, rg: str, job: str, run: TesterRun) -> WorkloadResult | None:
        """After Ctrl-C: the container's own end when it had ended (its execution is read for up to
        INTERRUPT_READ_S, as an ended execution's exit codes can come a moment after its status),
        else `stopped` when it ran or runs (teardown stops it), else None (it never started)."""
        deadline = time.monotonic() + INTERRUPT_READ_S
        info = run.info
        while True:
            info = self._execution(rg, job, run.execution) or info
            if info is not None and info.finished and (info.exit_codes or info.status == "Succeeded"):
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if info is not None and info.finished:
            run.info = info
            if run.exit_code is not None:
                return WorkloadResult("exited", run.exit_code, execution=run.execution, seconds=run.seconds)
        running = info is not None and (info.finished or info.status == "Running")
        if not running and run.running is None and run.first_line is None and not self.console.count():
            return None
        return WorkloadResult(
            "stopped", reason="stopped by Ctrl-C while it ran", execution=run.execution, seconds=run.seconds
        )

    def _staged_copy(self, job: JobSpec) -> JobSpec:
        """A warm environment's staged copy of the image (by tag, pulled with its identity), unless
        the user named a registry of their own (docs/staging.md)."""
        deployed = getattr(self, "_deployed", None)
        image = (
            deployed(job.container.image)
            if deployed is not None and not job.registries
            else job.container.image
        )
        if image == job.container.image:
            return job
        registries = getattr(self, "_registries")(image)  # noqa: B009 - AcaRuntime's, mixed in
        return replace(job, container=replace(job.container, image=image), registries=registries)

    def _check_storages(self, group: str, environment: str) -> None:
        """Every --mount names a storage of the environment, checked in preflight: before the run's
        group (or anything else) exists, so bad input is exit 2 with nothing created."""
        wanted = [m.source for m in self.spec.workload.mounts]
        if not wanted:
            return
        have = self.cloud.environment_storages(group, environment)
        missing = sorted(set(wanted) - set(have))
        if missing:
            raise PreflightRefused(
                f"environment {environment} has no storage {', '.join(missing)} "
                f"(it has: {', '.join(sorted(have)) or 'none'})",
                code="StorageNotFound",
                hint="add --create-share to make it (an Azure Files share kept with the environment), "
                "or add your own share (`az containerapp env storage set`)",
            )

    def _follow(self, plan: Plan, where: Where, job: str, run: TesterRun, waiter: Waiter) -> None:
        """Every line once, in order, until the execution ends (or the deadline, or Ctrl-C): the
        stream, then the environment's Log Analytics workspace for what it missed (follow.py)."""

        def workspace() -> str | None:
            try:
                env = self.cloud.get_environment(where.environment_group, where.environment)
            except AcaGpuError:
                return None
            return env.logs_workspace if env is not None else None

        self.followed = follow_execution(
            self.cloud,
            where.resource_group,
            job,
            run,
            waiter,
            timeout=plan.start_timeout_s + plan.tester_timeout_s + 60,
            emit=self.console.line,
            note=self.console.note,
            logs_workspace=workspace,
        )

    def _execution(self, rg: str, job: str, execution: str) -> ExecutionInfo | None:
        try:
            return self.cloud.get_execution(rg, job, execution)
        except AcaGpuError:
            return None

    def _final_status(self, rg: str, job: str, run: TesterRun, waiter: Waiter) -> ExecutionInfo | None:
        if run.gone is not None:
            return run.info
        deadline = time.monotonic() + FINAL_STATUS_WAIT_S
        info = run.info
        while not (info is not None and info.finished and (info.exit_codes or info.status != "Succeeded")):
            if time.monotonic() >= deadline or waiter.cancel.is_set():
                break
            waiter.cancel.wait(min(waiter.interval, 1.0))
            info = self._execution(rg, job, run.execution) or info
        return info

    def _watch_placement(self, rg: str, job: str, run: TesterRun) -> list[str]:
        """The replica's details until its container runs (or the execution ends): ACA says a region
        had no room ("WorkLoad Profile Full") only on the replica, which goes with the execution, so
        a run never placed is judged on what was seen here (exit 3, not "still running")."""
        seen: list[str] = []

        def watch() -> None:
            pause, longest = PLACEMENT_LOOK_S
            while run.ended is None and run.running is None and run.first_line is None:
                try:
                    replicas = self.cloud.list_execution_replicas(rg, job, run.execution)
                except AcaGpuError:
                    replicas = []
                for replica in replicas:
                    states = [(c.running_state or "").lower() for c in replica.containers]
                    if {"running", "terminated"} & set(states or [(replica.running_state or "").lower()]):
                        return
                seen.extend(d for d in replica_details(replicas) if d not in seen)
                time.sleep(pause)
                pause = min(pause * 2, longest)

        spawn(watch, "acagpu-placement")
        return seen

    def _watch_driver(
        self, where: Where, pair: Pair, job: str, run: TesterRun, waiter: Waiter
    ) -> list[tuple[str, str]]:
        """The host's driver as the platform says it (`GpuDriverInfo`), before the container starts:
        remembered for predictions, and an image whose CUDA it cannot run stops the execution now
        (the refusal, exit 5, names the driver and the event) instead of after its pull."""
        refusal: list[tuple[str, str]] = []  # (why, what to do)
        image = self.spec.workload.image

        def watch() -> None:
            place = (where.environment_group, where.environment)
            while run.ended is None and run.running is None and run.first_line is None:
                driver = driver_said(self.cloud, where.resource_group, job, place)
                if driver is not None:
                    drivers.remember_driver(
                        pair.profile.type, where.location, driver, how="GpuDriverInfo event"
                    )
                    try:
                        found = cuda_compat.verdict(parse_image_ref(image), driver)
                    except AcaGpuError:
                        return
                    if not found.ok:
                        major = int((found.cuda_version or "0").split(".")[0])
                        floor = cuda_compat.minor_compat_floor(major) or found.min_driver  # what starts it
                        need = f"driver {floor} or newer" if floor else "a newer driver"
                        refusal.append(
                            (
                                f"host driver {driver} (the platform's GpuDriverInfo event for {job}, "
                                f"before its container started) cannot run {image}: {found.reason}",
                                f"the image needs {need}: use an image built for CUDA "
                                f"{found.max_cuda or 'an older version'} or older, or try another region",
                            )
                        )
                        with suppress(AcaGpuError):
                            self.cloud.stop_execution(where.resource_group, job, run.execution)
                    return
                waiter.cancel.wait(min(DRIVER_LOOK_S, waiter.interval))

        spawn(watch, "acagpu-driver")
        return refusal

    def _judge(
        self,
        plan: Plan,
        where: Where,
        job: str,
        run: TesterRun,
        info: ExecutionInfo | None,
        placement: list[str] | None = None,
    ) -> WorkloadResult:
        seconds = run.seconds
        run.info = info
        if run.gone is not None:
            return WorkloadResult(
                "gone",
                reason=f"its job {job} was deleted while the container ran; counted until then",
                execution=run.execution,
                seconds=seconds,
                error=InfraError(
                    f"the container's job {job} was deleted while it ran (its environment "
                    f"{plan.env or where.environment} or run group {where.resource_group} was removed), "
                    "so its end and exit code are unknown",
                    code="JobDeleted",
                    hint="`acagpu env delete --force` and `acagpu down` remove the runs inside; "
                    "run it again once the environment exists",
                ),
            )
        said = " ".join(filter(None, (info.reason, info.message))) if info else ""
        if "deadline" in said.lower():
            # a replica whose pull kept failing never printed a line: a pull error, not a timeout
            why = explain.refusal(self.spec.workload.image, self._events(where, job), reasons=True)
            if run.first_line is None and why.error is not None:
                return self._never_ran(run, why)
            if run.running is None and run.first_line is None:  # it never ran: nothing was slow
                evidence = [*(placement or []), *self._events(where, job)]
                full = capacity.unplaced(f"the container's execution {run.execution}", evidence)
                if full is not None:
                    run.never_ran = True
                    with self._lock:  # no replica ran: nothing of it is billed
                        self._testers[:] = [t for t in self._testers if t is not run]
                    return WorkloadResult(
                        "unplaced", reason=full.message, execution=run.execution, error=full
                    )
                why_not = f"never started: no replica of it ran before --max-minutes {plan.max_minutes}"
                return WorkloadResult("timeout", reason=why_not, execution=run.execution, seconds=seconds)
            why_not = f"still running after --max-minutes {plan.max_minutes}: stopped by the platform"
            return WorkloadResult("timeout", reason=why_not, execution=run.execution, seconds=seconds)
        if run.exit_code is not None:  # only an ended execution's code is the container's
            return self._exited(where, job, run, run.exit_code)
        if info is not None and info.status == "Succeeded":
            return WorkloadResult("exited", 0, execution=run.execution, seconds=seconds)
        if info is not None and info.status == "Failed":
            return self._refused(where, job, run, said)
        what = info.status if info else "unknown"
        return WorkloadResult(
            "unknown", reason=f"the execution's end was not learnt (status {what})",
            execution=run.execution, seconds=seconds,
        )  # fmt: skip

    def _exited(self, where: Where, job: str, run: TesterRun, code: int) -> WorkloadResult:
        """The container's own code, with the reason when it crashed in a known way: a program the
        runtime could not execute (a refusal, exit 5), or out of memory (the platform's OOMKilled)."""
        lines = self.console.lines
        refused = explain.exec_refusal(len(lines["stdout"]), lines["stderr"]) if code else None
        if refused is not None:
            return WorkloadResult("refused", code, refused.reason, refused.hint, run.execution, run.seconds)
        # the platform's events say OOMKilled; a shell's own stderr says what it could not execute
        killed = code == runtime_errors.SIGKILL_EXIT
        said = "\n".join(self._events(where, job) if killed else lines["stderr"][-STDERR_TAIL:])
        crash = explain.crash(code, said)
        return WorkloadResult(
            "exited", code, crash.reason if crash else None, crash.hint if crash else None,
            run.execution, run.seconds,
        )  # fmt: skip

    def _refused(self, where: Where, job: str, run: TesterRun, said: str) -> WorkloadResult:
        """The container never ran: the platform's own reason, and what to do when it is known (an
        image that could not be pulled is ImagePullFailed, exit 2 or 7: `explain.py`)."""
        events = self._events(where, job)
        starts = [e for e in events if e.split(":", 1)[0] in START_FAILURES] or events[-1:]
        fallback = starts[-1] if starts else said or "the execution failed without a container exit code"
        why = explain.refusal(self.spec.workload.image, events, reasons=True, fallback=fallback)
        return self._never_ran(run, why)

    def _never_ran(self, run: TesterRun, why: explain.Explained) -> WorkloadResult:
        run.first_line = run.ended
        run.never_ran = True
        with self._lock:  # no replica ran: nothing of it is billed
            self._testers[:] = [t for t in self._testers if t is not run]
        return WorkloadResult("refused", None, why.reason, why.hint, run.execution, 0.0, why.error)

    def _events(self, where: Where, job: str) -> list[str]:
        """The job's own system events (`Reason: message`, oldest first); in a shared (warm)
        environment, other jobs' events are left out when the events name their job."""
        try:
            events = self.cloud.system_events(
                where.environment_group, environment=where.environment, tail=EVENTS_TAIL
            )
        except AcaGpuError:
            return []
        named = [e for e in events if event_owner(e)]
        own = [e for e in named if event_owner(e).lower() == job.lower()] if named else events
        return event_reasons(own, limit=EVENTS_KEPT)


class AcaWorkloadRuntime(Workload, AcaRuntime):
    """The run's own tagged group and environment, torn down after."""

    def __init__(self, cloud: Cloud, waiter: Waiter, spec: RunSpec, console: Console) -> None:
        AcaRuntime.__init__(self, cloud, waiter)
        self.spec, self.console, self.result = spec, console, None

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        self._before_teardown()
        return AcaRuntime.remove_place(self, plan, progress)


class WarmWorkloadRuntime(Workload, WarmRuntime):
    """Inside a warm environment: the run brings only its job (in a group of its own); teardown
    removes that group, never the environment."""

    def __init__(
        self,
        cloud: Cloud,
        waiter: Waiter,
        group: ResourceGroupInfo,
        env: EnvInfo,
        spec: RunSpec,
        console: Console,
    ) -> None:
        WarmRuntime.__init__(self, cloud, waiter, group, env)
        self.spec, self.console, self.result = spec, console, None

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        self._before_teardown()
        return WarmRuntime.remove_place(self, plan, progress)
        self.shares_made: shares.Made | None = None

    def preflight(self, plan: Plan, progress: Progress) -> None:
        """`--create-share`: the environment's missing shares are made here, before the run's own
        group exists; they stay with the environment (its group), not with the run."""
        WarmRuntime.preflight(self, plan, progress)
        wanted = [m.source for m in self.spec.workload.mounts]
        if wanted and not self.spec.create_share:
            with progress.step("environment storages") as step:
                try:
                    self._check_storages(self.group.name, self.place.name)
                except PreflightRefused:
                    step.status = "fail"
                    raise
                step.update(", ".join(dict.fromkeys(wanted)))
        if not (self.spec.create_share and wanted):
            return
        with progress.step("file shares (kept with the environment)") as step:
            self.shares_made = shares.ensure(
                self.cloud,
                env_name=plan.env or "",
                resource_group=self.group.name,
                environment=self.place.name,
                location=self.group.location,
                group_tags=dict(self.group.tags),
                shares=wanted,
                say=step.update,
            )
            made = self.shares_made.created
            step.update(
                f"made {', '.join(made)}" if made else f"{', '.join(wanted)} in {self.shares_made.account}"
            )


def runtime_for(
    cloud: Cloud, plan: Plan, waiter: Waiter, spec: RunSpec, console: Console
) -> tuple[Plan, AcaWorkloadRuntime | WarmWorkloadRuntime]:
    """Cold (a run-scoped group + environment) or borrowed (`--env`), with the plan moved there."""
    if plan.env is None:
        return plan, AcaWorkloadRuntime(cloud, waiter, spec, console)
    group, env = find_env(cloud, plan.env)
    return moved_to(plan, group), WarmWorkloadRuntime(cloud, waiter, group, env, spec, console)
