"""Azure Container Apps as the engine's runtime: a tagged group and environment, an nvidia-smi probe
job and a tester job per pair, and the billing-first teardown.

The probe is a job execution of the image under test (`probe_job.py`): its GPU-seconds end with its
command, and the job is deleted as soon as its answer is read. Only a kept run (`--keep`) gets the
CUDA explorer app instead, since `smi` and `exec` need a container that stays.

Every create is get-before-create, so the same run id resumes. The group counts as this run's once
a create was sent: after Ctrl-C mid-create it is found by its tags and removed like any other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, BadInput, InfraError, NotFound, PreflightRefused, WaitTimedOut
from aca_gpu.gpu import cuda_compat
from aca_gpu.models import AppSpec, Cloud, ContainerDef, EnvInfo, EnvSpec, JobSpec, RegistryCred, UsageInfo
from aca_gpu.output import Progress
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine import executions, parking
from aca_gpu.workflow.engine.lifetime import Lifetime
from aca_gpu.workflow.engine.outcome import ProbeResult, TeardownResult, TesterOutcome
from aca_gpu.workflow.engine.phases import phases_of
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.probe import probe_smi, wait_started
from aca_gpu.workflow.engine.probe_job import probe_container, probe_job, probe_job_name
from aca_gpu.workflow.engine.single_task import answer, run_execution
from aca_gpu.workflow.engine.task_records import Verdict
from aca_gpu.workflow.engine.teardown import teardown_group
from aca_gpu.workflow.engine.tester_run import (
    TESTER_RETRY,
    TesterRun,
    ensure_job,
    follow_result,
    start_execution,
    tester_verdict,
)
from aca_gpu.workflow.preflight import drivers, quota

T = TypeVar("T")

PROVIDER = "Microsoft.App"
REGISTER_TIMEOUT_S = 600.0
REGISTER_ATTEMPTS = 3
STOPPED = "stopped"
PROBE_SLACK_S = 300  # a probe job's replica timeout beyond its start timeout: nvidia-smi takes seconds
# ... and never under the tester's default (30 min): the replica timeout is only a backstop for a
# client that died (the client deletes the job once it has read it, or gives up at its start
# timeout), and a shorter one turns a slow placement into a failed execution before the client's own
# deadline could say what it waited for (the emulator's clock runs it out on a loaded machine)
PROBE_TIMEOUT_FLOOR_S = 1800


@dataclass(frozen=True)
class Where:
    """Where a run's jobs go: its group, region, environment, workload profile and tags."""

    resource_group: str  # the run's own group: its jobs
    location: str
    environment_id: str
    environment: str
    profile_name: str
    tags: Mapping[str, str]
    environment_group: str  # where the environment lives (a warm one's own group)


def require_offered(location: str, offered: list[str], wanted: list[str]) -> None:
    """PreflightRefused (in seconds, before anything exists) when `location` lacks a wanted profile."""
    offers = {name.lower() for name in offered}
    missing = sorted({t for t in wanted if t.lower() not in offers})
    if missing:
        raise PreflightRefused(
            f"{location} does not offer the {', '.join(missing)} workload profile",
            code="ProfileNotOffered",
            hint=f"`acagpu profiles -l {location}` lists what it offers",
        )


class AcaRuntime(parking.Parks):
    """The engine's Runtime over a `Cloud` (Azure, the emulator, or a test double)."""

    name = "aca"
    borrowed = False  # the place is a warm environment the run only borrows (WarmRuntime)
    keeps_console_lines = False  # its environment sends console lines to Log Analytics (acagpu run)

    def __init__(self, cloud: Cloud, waiter: Waiter) -> None:
        self.cloud, self.waiter = cloud, waiter
        self.env: EnvInfo | None = None
        self._sent_group = False
        self._lock = threading.Lock()
        self._explorer_seconds: dict[str, tuple[float, float | None]] = {}
        self._testers: list[TesterRun] = []
        self._tester_jobs: dict[str, list[TesterRun]] = {}  # by job name, for the delete that stops them
        self._resumed: list[str] = []
        self._probes: dict[str, list[executions.ExecutionRun]] = {}  # by probe job name
        self._parking = False  # remove_place stops at billing: the place is kept empty (parking.py)

    def _resume(self, what: str) -> None:
        with self._lock:
            if what not in self._resumed:
                self._resumed.append(what)

    # -- preflight ----------------------------------------------------------------------------
    def preflight(self, plan: Plan, progress: Progress) -> None:
        cloud = self.cloud
        self.env, self._sent_group = None, False  # a new region attempt: the last one was torn down
        with progress.step(f"provider {PROVIDER}") as step:
            if self._retry(lambda: cloud.provider_registered(PROVIDER)):
                step.update("registered")
            else:
                self._retry(lambda: cloud.register_provider(PROVIDER, timeout=REGISTER_TIMEOUT_S))
                step.update("registered now")
        offers = self._retry(lambda: cloud.available_profiles(plan.location))
        require_offered(plan.location, [o.name for o in offers], [t for _, t in plan.gpu_profiles])
        with progress.step("GPU quota") as step:
            checks_ = self.quota_checks(plan.location, [pair.profile for pair in plan.pairs])
            step.update("; ".join(c.summary() for c in checks_))
            for found in checks_:
                if found.usage is None:
                    progress.note(f"{plan.location}: {found.summary()}; going on")
                elif not found.ok:
                    step.status = "fail"
                    raise found.error()

    def quota_checks(self, location: str, profiles: list[checks.Profile]) -> list[quota.QuotaCheck]:
        """Each profile's GPU quota in `location` against one replica per pair (never raises)."""
        usages: list[UsageInfo] = []
        error: str | None = None
        try:
            usages = self._retry(lambda: self.cloud.usages(location))
        except AcaGpuError as exc:
            error = exc.message
        return [
            quota.check(location, usages, profile, needed, error)
            for profile, needed in quota.needs(profiles).values()
        ]

    def _retry(self, call: Callable[[], T]) -> T:
        """Safe calls (reads, provider registration) get a few tries beyond azure-core's own."""
        for attempt in range(1, REGISTER_ATTEMPTS):
            try:
                return call()
            except InfraError:
                self.waiter.cancel.wait(self.waiter.interval * attempt)
        return call()

    # -- the place ----------------------------------------------------------------------------
    def create_place(self, plan: Plan, progress: Progress, resumed: list[str]) -> None:
        cloud, rg = self.cloud, plan.names.resource_group
        self._resumed = resumed
        with progress.step("resource group") as step:
            group = cloud.get_resource_group(rg)
            if group is not None:
                tags = dict(group.tags)
                if not naming.is_managed(tags) or tags.get(naming.TAG_RUN_ID) != plan.run_id:
                    raise PreflightRefused(f"resource group {rg} exists and is not run {plan.run_id}'s")
                had = tags.get(naming.TAG_GPU)  # one GPU; a group made before that lists them all
                if had and plan.tags.get(naming.TAG_GPU) not in naming.tag_gpus(tags):
                    raise BadInput(
                        f"run {plan.run_id} was made for --gpu {had}, not {plan.tags.get(naming.TAG_GPU)}",
                        hint=f"resume it with --gpu {had}, or start a new run without --run-id",
                    )
                self._sent_group = True
                resumed.append("resource_group")
                step.update(f"{rg} (resumed)")
            else:
                self._sent_group = True  # from here on, a group with this run's tags is ours
                cloud.create_resource_group(rg, plan.location, plan.tags)
                step.update(rg)
        with progress.step("environment") as step:
            env = cloud.get_environment(rg, plan.names.environment)
            if env is not None and env.provisioning_state == "Succeeded":
                resumed.append("environment")
                step.update(f"{plan.names.environment} (resumed)")
            else:
                (first_name, first_type), *rest = plan.gpu_profiles
                logs = None
                if self.keeps_console_lines:  # a run's lines outlive its replica (docs/run.md)
                    step.update("Log Analytics workspace for the console lines")
                    logs = cloud.ensure_logs_workspace(
                        rg, naming.logs_workspace_name(plan.names.environment), plan.location, plan.tags
                    )
                env = cloud.create_environment(
                    EnvSpec(
                        resource_group=rg,
                        name=plan.names.environment,
                        location=plan.location,
                        tags=plan.tags,
                        gpu_profile_name=first_name,
                        gpu_profile_type=first_type,
                        dedicated_counts=None if plan.pairs[0].profile.serverless else (1, 1),
                        extra_gpu_profiles=tuple(rest),
                        logs=logs,
                    )
                )
                step.update(" + ".join(t for _, t in plan.gpu_profiles))
            self.env = env

    def has_place(self) -> bool:
        return self._sent_group

    # -- a pair -------------------------------------------------------------------------------
    def _where(self, plan: Plan, pair: Pair) -> Where:
        """The run's group and its own environment (a warm runtime borrows one elsewhere)."""
        assert self.env is not None
        rg, env = plan.names.resource_group, plan.names.environment
        return Where(rg, plan.location, self.env.id, env, pair.profile_name, plan.tags, rg)

    def _job(self, where: Where, name: str, container: ContainerDef, timeout_s: int) -> bool:
        """Get-before-create of a job of the run (True when it existed: a resumed run)."""
        return ensure_job(
            self.cloud,
            JobSpec(
                resource_group=where.resource_group,
                name=name,
                location=where.location,
                environment_id=where.environment_id,
                workload_profile_name=where.profile_name,
                container=container,
                tags=where.tags,
                replica_timeout_s=timeout_s,
                registries=self._registries(container.image),
            ),
        )

    def _deployed(self, image: str) -> str:
        """The reference a job pulls for `image` (a warm runtime's staged copy, when it has one)."""
        return image

    def _registries(self, image: str) -> tuple[RegistryCred, ...]:
        """How a job authenticates to the registry of `image` (none: a public registry)."""
        return ()

    def probe(self, plan: Plan, pair: Pair, waiter: Waiter) -> ProbeResult:
        """nvidia-smi as a job execution; the explorer app for a kept run (`smi`/`exec` need it
        later), also when this run id was kept before and is resumed."""
        if self._explorer_wanted(plan, pair):
            return self._explorer_probe(plan, pair, waiter)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the probe was created", code="Cancelled")
        where = self._where(plan, pair)
        job = probe_job_name(pair)
        container = probe_container(self._deployed(pair.image), pair.profile)
        timeout = max(int(plan.start_timeout_s) + PROBE_SLACK_S, PROBE_TIMEOUT_FLOOR_S)
        if self._job(where, job, container, timeout):
            self._resume("probe")
        self._not_cancelled(waiter, job)
        with self._lock:
            runs = self._probes.setdefault(job, [])
        result = probe_job(
            self.cloud,
            where.resource_group,
            job,
            container,
            waiter,
            start_timeout=plan.start_timeout_s,
            environment=where.environment,
            environment_group=where.environment_group,
            runs=runs,
            driver_check=self._driver_check(plan, pair, job),
            cap=plan.spend_cap,
        )
        self._release(where.resource_group, job)
        result = replace(result, platform=self._phases(where, job, runs[-1:]))
        if result.driver_version and not result.failed:
            drivers.remember_driver(pair.profile.type, plan.location, result.driver_version)
        return result

    @staticmethod
    def _driver_check(plan: Plan, pair: Pair, job: str) -> Callable[[str], str | None]:
        """What the platform's `GpuDriverInfo` event says, judged before the container starts: the
        driver is remembered (the next validation predicts with it), and an image whose CUDA it
        cannot run ends the pair now (exit 5) instead of after a pull that cannot help."""

        def check(driver: str) -> str | None:
            drivers.remember_driver(pair.profile.type, plan.location, driver, how="GpuDriverInfo event")
            found = cuda_compat.verdict(pair.ref, driver)
            if found.ok:
                return None
            return (
                f"host driver {driver} (the platform's GpuDriverInfo event for {job}, before its "
                f"container started) cannot run {pair.image}: {found.reason}"
            )

        return check

    @staticmethod
    def _not_cancelled(waiter: Waiter, job: str) -> None:
        """A Ctrl-C that came while the job was being made: no execution of it starts (bills)."""
        if waiter.cancel.is_set():
            raise WaitTimedOut(f"cancelled before an execution of {job} was started", code="Cancelled")

    def _explorer_wanted(self, plan: Plan, pair: Pair) -> bool:
        if self.borrowed:  # a warm run is never kept: its probe is always a job execution
            return False
        return plan.keep or self.cloud.get_app(plan.names.resource_group, pair.explorer) is not None

    def _phases(self, where: Where, job: str, runs: Sequence[executions.ExecutionRun] = ()) -> dict[str, Any]:
        """Scheduling, pull (size, MB/s) and start of the job's replica, from the environment's
        system events; empty when they cannot be read (a report, never a failure). The container's
        run by those events is also handed to `runs` (the job's last execution): it stands in for a
        GPU-seconds figure whose own evidence a fault took (`engine/lifetime.py`)."""
        try:
            events = self.cloud.system_events(
                where.environment_group, environment=where.environment, tail=200
            )
        except AcaGpuError:
            return {}
        found = phases_of(events, job)
        run_s = found.get("run_s")
        for run in runs:
            run.platform_run_s = float(run_s) if isinstance(run_s, int | float) else None
        return found

    def _release(self, resource_group: str, job: str) -> None:
        """Billing ends with the answer: the job goes now (its execution with it), not when the last
        pair of the run is done; teardown still lists the run's jobs until none is left."""

        def delete() -> None:
            with suppress(AcaGpuError):  # teardown deletes it, and says so if it cannot
                self.cloud.delete_job(resource_group, job, on_accepted=lambda: self._deleted(job))

        spawn(delete, "acagpu-release")

    def _explorer_probe(self, plan: Plan, pair: Pair, waiter: Waiter) -> ProbeResult:
        """The CUDA explorer app of a kept run: nvidia-smi by exec, the app stopped when kept."""
        cloud, rg = self.cloud, plan.names.resource_group
        requested = time.monotonic()
        app = cloud.get_app(rg, pair.explorer)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the explorer was created", code="Cancelled")
        if app is None:
            assert self.env is not None
            cloud.create_app(
                AppSpec(
                    resource_group=rg,
                    name=pair.explorer,
                    location=plan.location,
                    environment_id=self.env.id,
                    workload_profile_name=pair.profile_name,
                    container=checks.explorer_container(pair.image, pair.profile, plan.max_minutes),
                    tags=plan.tags,
                )
            )
        else:
            self._resume("explorer")
            if (app.running_status or "").lower() == STOPPED:  # kept by an earlier --keep
                cloud.start_app(rg, pair.explorer)
            elif not app.max_replicas:  # put to sleep at zero replicas by an older acagpu
                cloud.scale_app(rg, pair.explorer, 1, 1)
        seen_at: list[float] = []
        wait_started(cloud, rg, pair.explorer, waiter, timeout=plan.start_timeout_s, seen_at=seen_at)
        running = seen_at[0] if seen_at else time.monotonic()
        with self._lock:
            self._explorer_seconds[f"{rg}/{pair.explorer}"] = (running, None)
        result = probe_smi(cloud, rg, pair.explorer, waiter)
        result = replace(
            result, start_s=round(running - requested, 3), smi_s=round(time.monotonic() - running, 3)
        )
        if result.driver_version and not result.failed:
            drivers.remember_driver(pair.profile.type, plan.location, result.driver_version)
        return result

    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        """The tester's job (made here, or a kept run's for `acagpu test`), one execution, its result.

        The execution carries its own template (the job's container and the start's token); in a
        borrowed place the job goes as soon as the result is in, in a run's own with the group. A
        kept run's job (`acagpu test`) runs its own template: only the job knows it."""
        cloud = self.cloud
        where: Where | None = None
        template: list[ContainerDef] | None = None
        if plan.existing:
            rg, environment = plan.names.resource_group, plan.names.environment
            if cloud.get_job(rg, pair.tester) is None:
                raise PreflightRefused(
                    f"run {plan.run_id} has no tester job {pair.tester}", hint="`acagpu up --keep` makes one"
                )
            reused = False
        else:
            if waiter.cancel.is_set():
                raise WaitTimedOut("cancelled before the tester was created", code="Cancelled")
            where = self._where(plan, pair)
            rg, environment = where.resource_group, where.environment
            container = checks.tester_container(self._deployed(plan.tester_image), pair.profile)
            reused = self._job(where, pair.tester, container, plan.tester_timeout_s)
            template = [container]  # the job's own, with this start's token (`executions.start`)
        if reused:
            self._resume("tester")
        self._not_cancelled(waiter, pair.tester)

        def start(token: str) -> TesterRun:
            own = token if template is not None else None  # a kept job's template is its own
            run = start_execution(
                cloud, rg, pair.tester, resume=reused, template=template, own_token=own, cancel=waiter.cancel
            )
            with self._lock:
                self._testers.append(run)
                self._tester_jobs.setdefault(pair.tester, []).append(run)
            return run

        def read(run: TesterRun) -> Verdict:
            timeout = plan.start_timeout_s + plan.tester_timeout_s
            found = follow_result(
                cloud, rg, pair.tester, run, waiter, timeout=timeout, environment=environment
            )
            return tester_verdict(found)

        state = run_execution(
            cloud, rg, pair.tester, start, read,
            policy=TESTER_RETRY, cancel=waiter.cancel, label=f"the tester {pair.tester}",
            cap=plan.spend_cap,
        )  # fmt: skip
        outcome: TesterOutcome = answer(state, waiter.cancel)
        if self.borrowed:
            self._release(rg, pair.tester)
        if where is None:  # `acagpu test` on a kept run: its environment was not read
            return outcome
        with self._lock:
            runs = list(self._tester_jobs.get(pair.tester, [])[-1:])
        return replace(outcome, platform=self._phases(where, pair.tester, runs))

    # -- the end ------------------------------------------------------------------------------
    def _explorers_stopped(self) -> None:
        """Teardown begins: no replica of this run bills after its delete or stop is sent, and a
        tester that printed its result still bills until then (it lingers for its grace)."""
        now = time.monotonic()
        with self._lock:
            for name, (began, ended) in self._explorer_seconds.items():
                self._explorer_seconds[name] = (began, ended or now)
            for run in self._testers:
                run.stopped = run.stopped or now

    def _deleted(self, name: str) -> None:
        """ARM accepted the delete of app or job `name`: its replicas stop billing now."""
        now = time.monotonic()
        with self._lock:
            for key, (began, ended) in self._explorer_seconds.items():
                if key.rsplit("/", 1)[-1] == name:
                    self._explorer_seconds[key] = (began, ended or now)
            for run in [*self._tester_jobs.get(name, []), *self._probes.get(name, [])]:
                run.stopped = run.stopped or now

    def keep_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        """Stop every explorer (the stable Stop operation) and every tester execution still running
        (one whose stop after its result line did not go through): nothing bills on a serverless
        profile once both are stopped, and only then does the run say billing stopped."""
        self._explorers_stopped()
        rg, errors = plan.names.resource_group, []
        for pair in plan.pairs:
            try:
                if self.cloud.get_app(rg, pair.explorer) is not None:
                    self.cloud.stop_app(rg, pair.explorer)
            except AcaGpuError as exc:
                errors.append(f"stop {pair.explorer}: {exc.message}")
        errors += self._testers_stopped(rg)
        if plan.dedicated:
            progress.warn(
                f"the dedicated {plan.pairs[0].profile.type} node bills while the run is kept "
                f"(`acagpu down --run-id {plan.run_id}` stops it)"
            )
        return TeardownResult(
            "kept" if not errors else "incomplete",
            billing_stopped=not errors and not plan.dedicated,
            message="; ".join(errors) or None,
        )

    def _testers_stopped(self, rg: str) -> list[str]:
        """Stop each tester execution of this run not seen ended; what could not be stopped, said."""
        with self._lock:
            jobs = {name: list(runs) for name, runs in self._tester_jobs.items()}
        errors = []
        for job, runs in jobs.items():
            for run in runs:
                if run.info is not None and run.info.finished:
                    continue
                try:
                    self.cloud.stop_execution(rg, job, run.execution)
                except NotFound:
                    continue  # its job is gone, and its execution with it
                except AcaGpuError as exc:
                    errors.append(f"the tester {run.execution} still runs (stop: {exc.message})")
        return errors

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        """The run's replicas bill until teardown's deletes go out, so their lives end there (or
        here, when teardown fails before any delete)."""
        try:
            return teardown_group(
                self.cloud,
                plan.names.resource_group,
                wait_gone=plan.wait_gone,
                dedicated=plan.dedicated,
                poll=max(0.05, self.waiter.interval),
                on_deleted=self._deleted,
                keep_group=self._parking,
            )
        except PreflightRefused as exc:
            return TeardownResult("incomplete", message=exc.message)
        finally:
            self._explorers_stopped()

    def gpu_seconds(self) -> float:
        now = time.monotonic()
        with self._lock:
            explorers = sum((ended or now) - began for began, ended in self._explorer_seconds.values())
            testers = sum(run.seconds for run in self._testers)
            probes = sum(run.seconds for runs in self._probes.values() for run in runs)
        return explorers + testers + probes

    def gpu_lives(self) -> list[tuple[str, Lifetime]]:
        """Each execution's figure and how it was known, for the document's `gpu_seconds_quality`."""
        with self._lock:
            runs = [*self._testers, *(run for runs in self._probes.values() for run in runs)]
        return [(run.execution, run.lifetime) for run in runs]
