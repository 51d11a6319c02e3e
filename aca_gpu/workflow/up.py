"""`acagpu up` (DESIGN.md §1): preflight → RG → env → explorer ∥ tester → nvidia-smi → result → teardown.

Every step is get-before-create, so the same `--run-id` resumes. Whatever happens after the
resource group exists (an error, Ctrl-C) ends in teardown unless `--keep`; a second Ctrl-C leaves
the run in place and says how to remove it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import EXIT_GPU_CHECK, AcaGpuError, PreflightRefused, TeardownIncomplete
from aca_gpu.models import AppSpec, Cloud, EnvInfo, EnvSpec, JobSpec
from aca_gpu.output import Progress, StepHandle
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Waiter
from aca_gpu.workflow.down import teardown_group
from aca_gpu.workflow.plan import GPU_PROFILE_NAME, UpPlan, resource_names
from aca_gpu.workflow.probe import probe_smi
from aca_gpu.workflow.replicas import wait_app_replica
from aca_gpu.workflow.tester_run import TesterRun, ensure_job, follow_result, start_execution

PROVIDER = "Microsoft.App"
REGISTER_TIMEOUT_S = 600.0
EXIT_INTERRUPTED = 130


@dataclass
class UpResult:
    doc: dict[str, Any]
    exit_code: int
    error: AcaGpuError | None = None


@dataclass
class _State:
    phases: dict[str, float] = field(default_factory=dict)
    rg_ours: bool = False
    env: EnvInfo | None = None
    explorer_started: float | None = None
    explorer_stopped: float | None = None
    tester: TesterRun | None = None
    smi: dict[str, Any] = field(default_factory=dict)
    tester_result: dict[str, Any] | None = None
    teardown: dict[str, Any] = field(default_factory=lambda: {"status": "not-started", "verified": False})
    resumed: list[str] = field(default_factory=list)


class UpFlow:
    """One `up` invocation; `run()` never raises for cloud failures, it reports them with their exit code."""

    def __init__(self, cloud: Cloud, plan: UpPlan, progress: Progress, waiter: Waiter) -> None:
        self.cloud, self.plan, self.progress, self.waiter = cloud, plan, progress, waiter
        self.branch_waiter = Waiter(interval=waiter.interval)
        self.state = _State()

    # -- phases -----------------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[StepHandle]:
        started = time.monotonic()
        try:
            with self.progress.step(name) as handle:
                yield handle
        finally:
            self.state.phases[name] = round(time.monotonic() - started, 3)

    # -- the flow ---------------------------------------------------------------------------
    def run(self) -> UpResult:
        error: AcaGpuError | None = None
        interrupted = False
        try:
            self._provision_and_probe()
        except KeyboardInterrupt:
            interrupted = True
        except AcaGpuError as exc:
            error = exc
        except Exception as exc:  # an SDK or programming error must still tear down what we made
            error = AcaGpuError(f"unexpected failure: {type(exc).__name__}: {exc}")
        finally:
            self.branch_waiter.cancel.set()
        if interrupted:
            return self._after_interrupt()
        if error is not None and self.state.rg_ours and not self.plan.keep:
            self.progress.warn(f"{error.message} — tearing down run {self.plan.run_id}")
        try:
            self._finish()
        except KeyboardInterrupt:
            return self._left_behind("interrupted during teardown")
        except TeardownIncomplete as exc:
            self.state.teardown = {"status": "incomplete", "verified": False, "message": exc.message}
            error = error or exc
        except AcaGpuError as exc:
            self.state.teardown = {"status": "failed", "verified": False, "message": exc.message}
            error = error or TeardownIncomplete(exc.message, hint=self._down_hint())
        if error is not None:
            return UpResult(self.document("failed", error), error.exit_code, error)
        if self._gpu_check_failed():
            return UpResult(self.document("gpu_check_failed"), EXIT_GPU_CHECK)
        return UpResult(self.document("ok"), 0)

    def _provision_and_probe(self) -> None:
        self._preflight()
        self._resource_group()
        self._environment()
        self._explorer_and_tester()

    def _preflight(self) -> None:
        plan, cloud = self.plan, self.cloud
        with self.phase(f"provider {PROVIDER}") as step:
            if cloud.provider_registered(PROVIDER):
                step.update("registered")
            else:
                cloud.register_provider(PROVIDER, timeout=REGISTER_TIMEOUT_S)
                step.update("registered now")
        with self.phase("preflight") as step:
            offers = cloud.available_profiles(plan.location)
            names = {o.name.lower() for o in offers}
            if plan.profile.type.lower() not in names:
                raise PreflightRefused(
                    f"{plan.location} does not offer the {plan.profile.type} workload profile",
                    hint=f"`acagpu profiles -l {plan.location}` lists what it offers",
                )
            step.update(f"{plan.location} offers {plan.profile.type}")

    def _resource_group(self) -> None:
        plan, cloud = self.plan, self.cloud
        name = plan.names.resource_group
        with self.phase("resource group") as step:
            group = cloud.get_resource_group(name)
            if group is not None:
                tags = dict(group.tags)
                if not naming.is_managed(tags) or tags.get(naming.TAG_RUN_ID) != plan.run_id:
                    raise PreflightRefused(f"resource group {name} exists and is not run {plan.run_id}'s")
                self.state.resumed.append("resource_group")
                step.update(f"{name} (resumed)")
            else:
                cloud.create_resource_group(name, plan.location, plan.tags)
                step.update(name)
            self.state.rg_ours = True

    def _environment(self) -> None:
        plan, cloud = self.plan, self.cloud
        rg, name = plan.names.resource_group, plan.names.environment
        with self.phase("environment") as step:
            env = cloud.get_environment(rg, name)
            if env is not None and env.provisioning_state == "Succeeded":
                self.state.resumed.append("environment")
                step.update(f"{name} (resumed)")
            else:
                spec = EnvSpec(
                    resource_group=rg,
                    name=name,
                    location=plan.location,
                    tags=plan.tags,
                    gpu_profile_name=GPU_PROFILE_NAME,
                    gpu_profile_type=plan.profile.type,
                    dedicated_counts=None if plan.profile.serverless else (1, 1),
                )
                env = cloud.create_environment(spec)
                step.update(f"{name} + {plan.profile.type}")
            self.state.env = env

    def _explorer_and_tester(self) -> None:
        """Explorer and tester start together; nvidia-smi runs while the tester works and is followed."""
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="acagpu-up")
        try:
            tester: Future[dict[str, Any]] = pool.submit(self._run_tester)
            with self.phase("explorer start") as step:
                explorer: Future[None] = pool.submit(self._start_explorer)
                # Only the explorer gates nvidia-smi; the tester keeps running, but its failure stops us.
                while not explorer.done():
                    running: list[Future[Any]] = [f for f in (explorer, tester) if not f.done()]
                    wait(running, return_when=FIRST_COMPLETED)
                    if tester.done() and tester.exception() is not None:
                        self.branch_waiter.cancel.set()
                        tester.result()
                if explorer.exception() is not None:
                    self.branch_waiter.cancel.set()
                explorer.result()
                step.update(f"{self.plan.names.explorer} running")
            with self.phase("nvidia-smi") as step:
                self.state.smi = probe_smi(
                    self.cloud, self.plan.names.resource_group, self.plan.names.explorer, self.waiter
                )
                smi = self.state.smi
                step.update(f"driver {smi.get('driver_version')} · CUDA {smi.get('cuda_version')}")
                if smi.get("error"):
                    step.status = "fail"
            with self.phase("test run") as step:
                self.state.tester_result = tester.result()
                started = self.state.phases.get("tester start")
                after = f" · replica up after {started:.0f}s" if started is not None else ""
                step.update(f"{self.state.tester_result.get('status', '?')}{after}")
                if checks.tester_failed(self.state.tester_result):
                    step.status = "fail"
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _start_explorer(self) -> None:
        plan, cloud = self.plan, self.cloud
        rg, name = plan.names.resource_group, plan.names.explorer
        app = cloud.get_app(rg, name)
        if app is None:
            assert self.state.env is not None
            cloud.create_app(
                AppSpec(
                    resource_group=rg,
                    name=name,
                    location=plan.location,
                    environment_id=self.state.env.id,
                    workload_profile_name=GPU_PROFILE_NAME,
                    container=checks.explorer_container(plan.image, plan.profile, plan.max_minutes),
                    tags=plan.tags,
                )
            )
        else:
            self.state.resumed.append("explorer")
            if not app.max_replicas or not app.min_replicas:  # scaled to zero by an earlier --keep
                cloud.scale_app(rg, name, 1, 1)
        wait_app_replica(cloud, rg, name, self.branch_waiter, timeout=plan.start_timeout_s)
        self.state.explorer_started = time.monotonic()

    def _run_tester(self) -> dict[str, Any]:
        """Create (or reuse) the job, start an execution and follow it to its result line at once."""
        plan, cloud = self.plan, self.cloud
        rg, name = plan.names.resource_group, plan.names.tester
        began = time.monotonic()
        assert self.state.env is not None
        spec = JobSpec(
            resource_group=rg,
            name=name,
            location=plan.location,
            environment_id=self.state.env.id,
            workload_profile_name=GPU_PROFILE_NAME,
            container=checks.tester_container(plan.tester_image, plan.profile),
            tags=plan.tags,
            replica_timeout_s=plan.tester_timeout_s,
        )
        reused = ensure_job(cloud, spec)
        if reused:
            self.state.resumed.append("tester")
        run = start_execution(cloud, rg, name, resume=reused)
        self.state.tester = run
        try:
            return follow_result(
                cloud,
                rg,
                name,
                run,
                self.branch_waiter,
                timeout=plan.start_timeout_s + plan.tester_timeout_s,
                environment=plan.names.environment,
            )
        finally:
            if run.first_line is not None:
                self.state.phases["tester start"] = round(run.first_line - began, 3)

    # -- the end ----------------------------------------------------------------------------
    def _finish(self) -> None:
        """Teardown unless --keep; with --keep the explorer scales to zero so it stops billing."""
        if not self.state.rg_ours:
            self.state.teardown = {"status": "nothing-created", "verified": True}
            return
        self.state.explorer_stopped = time.monotonic()
        if self.plan.keep:
            with self.phase("scale explorer to zero") as step:
                if self.cloud.get_app(self.plan.names.resource_group, self.plan.names.explorer) is None:
                    step.skip("no explorer")
                else:
                    self.cloud.scale_app(self.plan.names.resource_group, self.plan.names.explorer, 0, 0)
            self.state.teardown = {"status": "kept", "verified": False, "explorer_scaled_to_zero": True}
            self.progress.note(f"kept: `acagpu down --run-id {self.plan.run_id}` removes it")
            return
        with self.phase("teardown") as step:
            self.state.teardown = teardown_group(self.cloud, self.plan.names.resource_group, self.waiter)
            step.update("verified gone" if self.state.teardown["verified"] else self.state.teardown["status"])

    def _after_interrupt(self) -> UpResult:
        if not self.state.rg_ours:
            self.state.teardown = {"status": "nothing-created", "verified": True}
            return UpResult(self.document("interrupted"), EXIT_INTERRUPTED)
        self.progress.warn(f"interrupted: tearing down run {self.plan.run_id} (Ctrl-C again to leave it)")
        self.state.explorer_stopped = time.monotonic()
        try:
            with self.phase("teardown"):
                self.state.teardown = teardown_group(self.cloud, self.plan.names.resource_group, self.waiter)
        except KeyboardInterrupt:
            return self._left_behind("interrupted twice")
        except AcaGpuError as exc:
            self.state.teardown = {"status": "incomplete", "verified": False, "message": exc.message}
        return UpResult(self.document("interrupted"), EXIT_INTERRUPTED)

    def _left_behind(self, why: str) -> UpResult:
        self.state.teardown = {"status": "left", "verified": False}
        self.progress.warn(
            f"{why}: run {self.plan.run_id} left in place; remove it with: {self._down_hint()}"
        )
        return UpResult(self.document("interrupted"), EXIT_INTERRUPTED)

    def _down_hint(self) -> str:
        return f"acagpu down --run-id {self.plan.run_id}"

    def _gpu_check_failed(self) -> bool:
        doc = self.document("ok")
        explorer, tester = doc["explorer"], doc["tester"]
        return bool(
            explorer.get("error")
            or checks.compat_failed(explorer.get("compat") or {})
            or checks.compat_failed(tester.get("compat") or {})
            or (self.state.tester_result is not None and checks.tester_failed(self.state.tester_result))
        )

    # -- the report -------------------------------------------------------------------------
    def document(self, status: str, error: AcaGpuError | None = None) -> dict[str, Any]:
        plan, state = self.plan, self.state
        driver = state.smi.get("driver_version")
        explorer: dict[str, Any] = {
            "image": plan.image,
            "driver_version": driver,
            "cuda_version": state.smi.get("cuda_version"),
            "gpus": state.smi.get("gpus", []),
            "error": state.smi.get("error"),
            "compat": checks.compat(plan.image, driver),
        }
        tester: dict[str, Any] = {
            "image": plan.tester_image,
            "execution": state.tester.execution if state.tester else None,
            "result": state.tester_result,
            "compat": checks.compat(plan.tester_image, driver),
        }
        return {
            "schema": 1,
            "command": "up",
            "run_id": plan.run_id,
            "status": status,
            "location": plan.location,
            "profile": checks.profile_dict(plan.profile, plan.gpu),
            "resources": resource_names(plan.names),
            "resumed": list(state.resumed),
            "explorer": explorer,
            "tester": tester,
            "phases": dict(state.phases),
            "cost": checks.cost_estimate(
                plan.profile, self._gpu_seconds(), plan.location, label="measured replica lifetimes"
            ),
            "teardown": dict(state.teardown),
            "error": error.as_dict() if error else None,
        }

    def _gpu_seconds(self) -> float:
        total = 0.0
        if self.state.explorer_started is not None:
            total += max(0.0, (self.state.explorer_stopped or time.monotonic()) - self.state.explorer_started)
        if self.state.tester is not None:
            total += self.state.tester.seconds
        return total


def up(cloud: Cloud, plan: UpPlan, progress: Progress, waiter: Waiter) -> UpResult:
    return UpFlow(cloud, plan, progress, waiter).run()
