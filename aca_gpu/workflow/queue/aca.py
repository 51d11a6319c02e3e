"""Queue mode's place and work: the engine's warm runtime with the queue drained in the tester's place.

The engine runs it like any run in a warm environment: preflight, the run's own group, the work,
teardown in `finally`, Ctrl-C once. The work is:

1. the environment's storage account (made on request, as `--create-share` makes it; it stays
   with the environment), and in it the run's three queues: items, results, poison;
2. every item on the items queue, then one Event job whose KEDA `azure-queue` rule starts up to P
   workers while messages wait (the platform schedules them: acagpu starts no execution);
3. the watch: the results queue read every tick (each worker's result message, taken and deleted
   once recorded), the job's executions listed, one progress line whenever something changed,
   until every item has its final result (succeeded, or poisoned after K deliveries).

Teardown deletes the job first (billing), then the run's queues; a Ctrl-C takes the results that
arrived by then, so the document says which items were done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from aca_gpu.errors import AcaGpuError, PreflightRefused, QuotaError, WaitTimedOut
from aca_gpu.models import Cloud, EnvInfo, ExecutionInfo, Queues, ResourceGroupInfo
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.aca_runtime import AcaRuntime
from aca_gpu.workflow.engine.outcome import TesterOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.tester_run import ensure_job
from aca_gpu.workflow.env import shares
from aca_gpu.workflow.queue import worker
from aca_gpu.workflow.queue.spec import QueueSpec, decode
from aca_gpu.workflow.workload.aca import WarmWorkloadRuntime, job_spec
from aca_gpu.workflow.workload.outcome import Console

RESULT_VISIBILITY_S = 30  # a results message taken and not yet deleted shows again after this
FINAL = ("succeeded", "poisoned")


def _seconds(execution: ExecutionInfo, now: datetime) -> float:
    if not execution.start_time:
        return 0.0
    start = datetime.fromisoformat(execution.start_time.replace("Z", "+00:00"))
    end = datetime.fromisoformat(execution.end_time.replace("Z", "+00:00")) if execution.end_time else now
    return max(0.0, (end - start).total_seconds())


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
        self.results: dict[int, dict[str, Any]] = {}  # index -> its final result (or last failure)
        self.deliveries: dict[int, list[dict[str, Any]]] = {}  # index -> every result message
        self.duplicates = 0  # a second success of one item (recorded once, counted here)
        self.account: str | None = None
        self.queues: Queues | None = None
        self.made: list[str] = []  # the queues this run created (teardown deletes these only)
        self.job: tuple[str, str] | None = None  # (group, job)
        self.executions: dict[str, ExecutionInfo] = {}
        self.errors: list[str] = []
        self.done = threading.Event()
        self._shown = ""
        self.clamp: dict[str, Any] | None = None  # --workers against the GPU quota (read_clamp's doc)

    # -- preflight: P against the GPU quota, as a fan-out's --parallel --------------------------------
    def preflight(self, plan: Plan, progress: Progress) -> None:
        """The warm run's checks, then --workers clamped to the GPUs free: 8 workers in an environment
        of 4 GPUs were all started (the emulator's KEDA ran them; ACA would hold or fail the rest)."""
        try:
            WarmWorkloadRuntime.preflight(self, plan, progress)
        except QuotaError:
            self._clamp_workers(plan, progress)  # a quota of 0: exit 2, said before "none free now"
            raise
        self._clamp_workers(plan, progress)

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
            queues.create(name)
            self.made.append(name)
        self.say(f"queueing {len(self.queue.items)} items on {self.queue.work_queue} in {made.account}")
        queues.send(self.queue.work_queue, self.queue.messages())
        return queues

    def _drain(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        where = self._where(plan, pair)
        if waiter.cancel.is_set():
            raise WaitTimedOut("cancelled before the queues were made", code="Cancelled")
        queues = self._fill(plan)
        assert self.account is not None
        job = worker.event_job(job_spec(self.queue.run, plan, pair, where), self.queue, self.account,
                               queues.endpoint)  # fmt: skip
        self.job = (where.resource_group, job.name)
        self.say(
            f"creating event job {job.name}: up to {self.queue.workers} workers while items wait "
            f"(KEDA azure-queue rule, polled every {self.queue.polling_s} s)"
        )
        ensure_job(self.cloud, job)
        AcaRuntime._not_cancelled(waiter, job.name)
        total = len(self.queue.items)
        while not waiter.cancel.is_set():
            self._collect()
            self._look()
            self._show()
            if sum(1 for r in self.results.values() if r["status"] in FINAL) >= total:
                break
            waiter.cancel.wait(self.tick_s)
        if waiter.cancel.is_set():
            raise WaitTimedOut("the queue's workers were stopped: cancelled", code="Cancelled")
        failed = [k for k in range(total) if self.results.get(k, {}).get("status") != "succeeded"]
        return TesterOutcome(
            "pass" if not failed else "fail",
            reason=None if not failed else f"{len(failed)} item(s) failed",
            seconds=self.gpu_seconds(),
        )

    def _collect(self) -> None:
        """Every result message waiting: recorded, then deleted (a lost delete shows it again,
        and a record is idempotent: one result per (item, delivery, worker))."""
        if self.queues is None:
            return
        while True:
            found = self.queues.receive(self.queue.results_queue, 32, RESULT_VISIBILITY_S)
            for message in found:
                try:
                    doc = decode(message.text)
                except ValueError:
                    self.errors.append(f"a message on {self.queue.results_queue} was not a result")
                else:
                    self._record(doc)
                self.queues.delete_message(self.queue.results_queue, message)
            if len(found) < 32:
                return

    def _record(self, doc: dict[str, Any]) -> None:
        index = int(doc["i"])
        mask = self.console.mask  # the run's --secret-env values, as a single run hides them
        if mask is not None:
            doc.update({k: mask(doc[k]) for k in ("output", "reason") if isinstance(doc.get(k), str)})
        if not 0 <= index < len(self.queue.items):
            self.errors.append(f"a result for item {index}, which this run does not have")
            return
        seen = self.deliveries.setdefault(index, [])
        key = (doc.get("delivery"), doc.get("worker"), doc.get("status"))
        if any((d.get("delivery"), d.get("worker"), d.get("status")) == key for d in seen):
            return
        seen.append(doc)
        current = self.results.get(index)
        if current is not None and current["status"] == "succeeded":
            if doc["status"] == "succeeded":
                self.duplicates += 1
            return
        if current is not None and current["status"] == "poisoned" and doc["status"] != "succeeded":
            return
        self.results[index] = doc

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
        statuses = [r["status"] for r in self.results.values()]
        running = sum(1 for e in self.executions.values() if not e.finished)
        return {
            "items": len(self.queue.items),
            "succeeded": statuses.count("succeeded"),
            "poisoned": statuses.count("poisoned"),
            "retrying": statuses.count("failed"),
            "waiting": len(self.queue.items) - len(self.results),
            "workers_running": running,
            "workers_started": len(self.executions),
        }

    def _show(self) -> None:
        c = self.counts()
        text = (
            f"items {c['succeeded'] + c['poisoned']}/{c['items']} done: {c['succeeded']} succeeded, "
            f"{c['poisoned']} poisoned, {c['retrying']} retrying; {c['workers_running']} workers running "
            f"({c['workers_started']} started); {self.gpu_seconds():.0f} replica-s so far"
        )
        if text != self._shown:
            self._shown = text
            self.say(text)

    # -- billing and teardown ---------------------------------------------------------------------
    def gpu_seconds(self) -> float:
        now = datetime.now().astimezone()
        return sum(_seconds(e, now) for e in self.executions.values())

    def remove_place(self, plan: Plan, progress: Progress) -> Any:
        """The job first (billing), then what arrived meanwhile, then the run's queues."""
        self._look()
        try:
            return WarmWorkloadRuntime.remove_place(self, plan, progress)
        finally:
            self._drop_queues(progress)

    def _drop_queues(self, progress: Progress) -> None:
        if self.queues is None or not self.made:
            return
        with progress.step("queues") as step:
            try:
                self._collect()
            except AcaGpuError as exc:
                self.errors.append(f"the last results: {exc.message}")
            for name in list(self.made):
                try:
                    self.queues.delete(name)
                    self.made.remove(name)
                except AcaGpuError as exc:
                    self.errors.append(f"queue {name} not deleted: {exc.message}")
            step.update("deleted" if not self.made else f"left: {', '.join(self.made)}")
            if self.made:
                step.status = "fail"


def queue_runtime_for(cloud: Cloud, plan: Plan, waiter: Waiter, queue: QueueSpec, console: Console,
                      say: Callable[[str], None], tick_s: float) -> tuple[Plan, QueueRuntime]:  # fmt: skip
    from aca_gpu.workflow.env.find import find_env
    from aca_gpu.workflow.env.warm_runtime import moved_to

    group, env = find_env(cloud, plan.env or "")
    return moved_to(plan, group), QueueRuntime(cloud, waiter, group, env, queue, console, say, tick_s)
