"""Queue mode's place and work: the engine's warm runtime with the queue drained in the tester's place.

The engine runs it like any run in a warm environment: preflight, the run's own group, the work,
teardown in `finally`, Ctrl-C once. The work is:

1. the environment's storage account (made on request, as `--create-share` makes it; it stays
   with the environment), and in it the run's three queues: items, results, poison (each marked
   with the run's id in its metadata, which every delete checks);
2. every item on the items queue, then one Event job whose KEDA `azure-queue` rule starts up to P
   workers while messages wait (the platform schedules them: acagpu starts no execution), its
   system identity granted a data role at each queue's own scope right after (env/run_queues.py; a
   worker that comes before the role is in effect waits for it: docs/queue.md);
3. the watch: the results queue read every tick (each worker's result message, taken and deleted
   once recorded), the job's executions listed, one progress line whenever something changed,
   until every item has its final result (succeeded, or poisoned after K deliveries).

Teardown deletes the job first (billing), then the workers' role assignments, then the run's queues;
a Ctrl-C takes the results that arrived by then, so the document says which items were done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from aca_gpu.errors import AcaGpuError, InfraError, PreflightRefused, QuotaError, WaitTimedOut
from aca_gpu.models import Cloud, EnvInfo, ExecutionInfo, Queues, ResourceGroupInfo
from aca_gpu.naming import TAG_RUN_ID
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter, down_hint
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime
from aca_gpu.workflow.engine.outcome import TeardownResult, TesterOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.tester_run import ensure_job
from aca_gpu.workflow.env import shares
from aca_gpu.workflow.env.run_queues import RunQueues, drop_run_queues, grant_worker_roles, owner_marks
from aca_gpu.workflow.queue import worker
from aca_gpu.workflow.queue.ledger import Ledger, execution_seconds, progress_text
from aca_gpu.workflow.queue.spec import QueueSpec
from aca_gpu.workflow.workload.aca import WarmWorkloadRuntime, job_spec
from aca_gpu.workflow.workload.outcome import Console

RESULT_VISIBILITY_S = 30  # a results message taken and not yet deleted shows again after this


class QueueRuntime(WarmWorkloadRuntime):
    """Inside a warm environment: the run brings its queues and one Event job."""

    def __init__(
        self,
        cloud: Cloud,
        waiter: Waiter,
        group: ResourceGroupInfo,
        env: EnvInfo,
        queue: QueueSpec,
        console: Console,
        say: Callable[[str], None],
        tick_s: float,
    ) -> None:
        WarmWorkloadRuntime.__init__(self, cloud, waiter, group, env, queue.run, console)
        self.queue, self.say, self.tick_s = queue, say, tick_s
        self.ledger = Ledger(queue.item_indexes)
        self.account: str | None = None
        self.queues: Queues | None = None
        self.made: list[str] = []  # the queues this run created (teardown deletes these only)
        self.roles: list[str] = []  # the role assignments granted to the Event job's identity
        self.job_roles: list[str] = []  # of which at the job's own scope (a warm floor's)
        self.job: tuple[str, str] | None = None  # (group, job)
        self.executions: dict[str, ExecutionInfo] = {}
        self.errors = self.ledger.errors
        self.done = threading.Event()
        self.detached = False
        self.drain_began = 0.0
        self.drain_s: float | None = None  # the job's creation to the last item's final result (real s)
        self._shown = ""
        self.clamp: dict[str, Any] | None = None  # --workers against the GPU quota (read_clamp's doc)

    # -- preflight: P against the GPU quota, as a fan-out's --parallel --------------------------------
    def preflight(self, plan: Plan, progress: Progress) -> None:
        """The warm run's checks, then --workers clamped to the GPUs free: 8 workers in an environment
        of 4 GPUs were all started (the emulator's KEDA ran them; ACA would hold or fail the rest).
        Last, whether the caller may grant the workers their role on the queues (exit 2 when ARM
        says no, before anything is made)."""
        try:
            WarmWorkloadRuntime.preflight(self, plan, progress)
        except QuotaError:
            self._clamp_workers(plan, progress)  # a quota of 0: exit 2, said before "none free now"
            raise
        self._clamp_workers(plan, progress)
        if self.cloud.may_assign_roles(self.group.name) is False:
            scope = f"/subscriptions/{self.cloud.subscription_id}/resourceGroups/{self.group.name}"
            raise PreflightRefused(
                f"you may not assign roles in {self.group.name}, and queue mode's workers need a role on "
                "the run's queues (their job's identity reads and writes them; no key is handed out)",
                code="AuthorizationFailed",
                hint=f"ask for 'Role Based Access Control Administrator' (or Owner) on {scope}",
            )

    def _clamp_workers(self, plan: Plan, progress: Progress) -> None:
        from aca_gpu.workflow.fanout.clamp import read_clamp

        with progress.step("workers (GPU quota)") as step:
            clamp = read_clamp(self.cloud, plan, self.queue.workers, (self.group, self.place))
            step.update(clamp.said)
            self.clamp = {"said": clamp.said, **(clamp.doc or {})}
            if clamp.refusal is not None:
                step.status = "fail"
                raise PreflightRefused(
                    clamp.refusal.message.replace("--parallel", "--workers").replace("no shard", "no worker"),
                    code=clamp.refusal.code,
                    hint=clamp.refusal.hint,
                )
            self.queue = replace(self.queue, workers=clamp.parallel)

    # -- the work ---------------------------------------------------------------------------------
    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        try:
            return self._drain(plan, pair, waiter)
        finally:
            self.done.set()

    def _fill(self, plan: Plan) -> Queues:
        made = shares.ensure(
            self.cloud,
            env_name=plan.env or "",
            resource_group=self.group.name,
            environment=self.place.name,
            location=self.group.location,
            group_tags=dict(self.group.tags),
            shares=[],
            say=self.say,
        )
        self.account = made.account
        queues = self.queues = self.cloud.queues(self.group.name, made.account)
        for name in self.queue.queues:
            self.made.append(name)  # before the create: one lost on its way is still deleted
            queues.create(name, owner_marks(self.queue.run_id))
        # before the job: its first poll finds every item (10,000 take about a minute to send)
        self.say(f"queueing {len(self.queue.items)} items on {self.queue.work_queue} in {made.account}")
        queues.send(self.queue.work_queue, self.queue.messages())
        return queues

    def _grant(self, group: str, job: str) -> None:
        """The Event job's identity gets its role at each queue's scope (none wider)."""
        assert self.account is not None
        found = self.cloud.get_job(group, job)
        principal = found.principal_id if found is not None else None
        if not principal:
            raise InfraError(f"job {job} has no system-assigned identity to grant the queues to",
                             code="NoIdentity")  # fmt: skip
        self.say(f"granting job {job}'s identity its role on each of the run's 3 queues (no wider scope)")
        self.roles = grant_worker_roles(self.cloud, self._run_queues(), principal)
        if self.queue.warm:  # the floor's last idle worker drops it (minExecutions 0) on this job alone
            said = f"{TAG_RUN_ID}={self.queue.run_id}"
            self.job_roles = [self.cloud.grant_job_role(group, job, principal, said)]
            self.roles.append(self.job_roles[0])

    def _run_queues(self) -> RunQueues:
        assert self.account is not None
        return RunQueues(self.queue.run_id, self.group.name, self.account, tuple(self.job_roles))

    def _drain(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        where = self._where(plan, pair)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the queues were made", code="Cancelled")
        queues = self._fill(plan)
        assert self.account is not None
        floor_via = (self.cloud.subscription_id, self.cloud.arm_base()) if self.queue.warm else None
        job = worker.event_job(job_spec(self.queue.run, plan, pair, where), self.queue, self.account,
                               queues.endpoint, floor_via)  # fmt: skip
        self.job = (where.resource_group, job.name)
        self.say(
            f"creating event job {job.name}: up to {self.queue.workers} workers while items wait "
            f"(KEDA azure-queue rule, polled every {self.queue.polling_s} s)"
        )
        ensure_job(self.cloud, job)
        self.drain_began = time.monotonic()  # the drain is timed from the job's creation
        self._grant(where.resource_group, job.name)
        AcaRuntime._not_cancelled(waiter, job.name)
        if self.queue.detach:
            self.detached = True  # from here on the workers need no client: teardown leaves the run
            return TesterOutcome("pass", reason=None, seconds=0.0)
        while not waiter.cancel.is_set():
            self._collect()
            self._look()
            self._show()
            if self.ledger.done:
                self.drain_s = round(time.monotonic() - self.drain_began, 3)
                break
            waiter.cancel.wait(self.tick_s)
        if waiter.cancel.is_set():
            raise WaitTimedOut("the queue's workers were stopped: cancelled", code="Cancelled")
        failed = self.ledger.failed_indexes()
        return TesterOutcome(
            "pass" if not failed else "fail",
            reason=None if not failed else f"{len(failed)} item(s) failed",
            seconds=self.gpu_seconds(),
        )

    def _collect(self) -> None:
        """Every result message waiting: recorded, then deleted (the attached run is their reader)."""
        if self.queues is not None:
            self.ledger.mask = self.console.mask  # the run's --secret-env values, as a single run hides them
            self.ledger.read(self.queues, self.queue.results_queue, RESULT_VISIBILITY_S, take=True)

    def _look(self) -> None:
        if self.job is None:
            return
        group, job = self.job
        try:
            for execution in self.cloud.list_executions(group, job):
                self.executions[execution.name] = execution
        except AcaGpuError as exc:  # a lost listing: the next tick looks again
            self.errors.append(f"listing the workers: {exc.message}")

    def counts(self) -> dict[str, int]:
        return self.ledger.counts(self.executions.values())

    def _show(self) -> None:
        text = progress_text(self.counts(), self.gpu_seconds())
        if text != self._shown:
            self._shown = text
            self.say(text)

    # -- billing and teardown ---------------------------------------------------------------------
    def gpu_seconds(self) -> float:
        now = datetime.now().astimezone()
        return sum(execution_seconds(e, now) for e in self.executions.values())

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        """The job first (billing), then what arrived meanwhile, then the run's queues. A detached
        run is left to its workers (its queues are its record)."""
        if self.detached:
            down = down_hint(plan.run_id, self.cloud, yes=False)
            return TeardownResult(
                "detached",
                message=f"its workers drain the queue on their own; `{down}` removes its job and queues, "
                "as reap and the guard do at its expiry",
            )
        self._look()
        try:
            return WarmWorkloadRuntime.remove_place(self, plan, progress)
        finally:
            self._drop_queues(progress)

    def _drop_queues(self, progress: Progress) -> None:
        """The workers' role assignments, then the queues this run made (each checked as the run's)."""
        if self.queues is None or not self.made:
            return
        with progress.step("queues") as step:
            try:
                self._collect()
            except AcaGpuError as exc:
                self.errors.append(f"the last results: {exc.message}")
            left = drop_run_queues(self.cloud, self._run_queues())
            self.errors += [f"not deleted: {why}" for why in left]
            self.made = [name for name in self.made if any(why.startswith(f"{name}:") for why in left)]
            step.update("role assignments and queues deleted" if not left else f"left: {'; '.join(left)}")
            if left:
                step.status = "fail"


def queue_runtime_for(cloud: Cloud, plan: Plan, waiter: Waiter, queue: QueueSpec, console: Console,
                      say: Callable[[str], None], tick_s: float) -> tuple[Plan, QueueRuntime]:  # fmt: skip
    from aca_gpu.workflow.env.find import find_env
    from aca_gpu.workflow.env.warm_runtime import moved_to

    group, env = find_env(cloud, plan.env or "")
    return moved_to(plan, group), QueueRuntime(cloud, waiter, group, env, queue, console, say, tick_s)
