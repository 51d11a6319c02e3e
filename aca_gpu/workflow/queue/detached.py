"""A detached queue run read back: `acagpu attach RUN_ID` and `acagpu results RUN_ID`.

Nothing local is needed: the run is found by its id (its group `rg-acagpu-<run>`, the Event job in
it whose `acagpu:queue` tag names the account, the item count, P, K and the price), its queues in
the environment's storage account, its workers in the job's executions. The results queue is the
run's only record, so these readers never delete from it: they receive each result message with a
short visibility timeout (`peek_s`: 2 s, longer for a large run) and let it show again. While one
reader holds messages invisible another sees fewer; `results` notices (the queue's count is larger
than what it read) and reads again once they show, saying so.

Exit codes: 0 when every item succeeded; 1 `ItemsFailed` when every item is final and some did not
succeed; 1 `ItemsNotDone` from `results` while items are still waiting or running (the document
has what is known); 130 when `attach` is interrupted (the run goes on).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, NotFound
from aca_gpu.models import Cloud, ExecutionInfo, JobInfo, Queues
from aca_gpu.units import gpu_seconds_text, usd_text
from aca_gpu.workflow.env.find import find_env
from aca_gpu.workflow.queue.ledger import Ledger, execution_seconds, progress_text

PEEK_S = 2  # a result message read by attach/results is invisible this long, then shows again


def peek_s(size: int) -> int:
    """The visibility of a read: long enough that a whole pass (32 messages a request, ~0.1 s each)
    ends before the first message shows again: 2 s for 600 items, 33 s for 10,000."""
    return PEEK_S + size // 320


HEARTBEAT_S = 30.0  # attach repeats its line when nothing changed for this long
READ_AGAIN = 3  # how often `results` reads again when another reader held messages


@dataclass(frozen=True)
class QueueRun:
    """Where a queue run is, from its tags."""

    run_id: str
    group: str  # the run's own group (its Event job)
    job: str
    env: str
    env_group: str  # the environment's group (the storage account)
    account: str
    size: int
    workers: int
    deliveries: int
    warm: int
    usd_s: float
    gpus: int
    replica_timeout_s: int

    @property
    def work_queue(self) -> str:
        return naming.run_queue_names(self.run_id)[0]

    @property
    def results_queue(self) -> str:
        return naming.run_queue_names(self.run_id)[1]

    @property
    def poison_queue(self) -> str:
        return naming.run_queue_names(self.run_id)[2]


def queue_job(jobs: list[JobInfo]) -> tuple[JobInfo, dict[str, str]] | None:
    for job in jobs:
        text = dict(job.tags).get(naming.TAG_QUEUE)
        if text:
            try:
                return job, naming.parse_queue_tag(text)
            except ValueError:
                continue
    return None


def find_queue_run(cloud: Cloud, run_id: str) -> QueueRun:
    naming.validate_run_id(run_id)
    name = naming.RunNames(run_id).resource_group
    group = cloud.get_resource_group(name)
    tags = dict(group.tags) if group is not None else {}
    if group is None or not naming.is_managed(tags) or tags.get(naming.TAG_RUN_ID) != run_id:
        raise NotFound(
            f"no run {run_id} (resource group {name} does not exist or is not its)",
            code="RunNotFound",
            hint="acagpu status lists the runs; a run removed by `down`, reap or the guard keeps no results",
        )
    found = queue_job(cloud.list_jobs(name))
    if found is None:
        raise NotFound(
            f"run {run_id} is no queue run (no job of it carries {naming.TAG_QUEUE}): attach and results "
            "read runs made with `run --map ITEMS --workers P`",
            code="NotAQueueRun",
        )
    job, tag = found
    env = tags.get(naming.TAG_ENV) or ""
    env_group, _ = find_env(cloud, env)
    return QueueRun(
        run_id=run_id,
        group=name,
        job=job.name,
        env=env,
        env_group=env_group.name,
        account=tag["account"],
        size=int(tag["items"]),
        workers=int(tag.get("workers") or 0),
        deliveries=int(tag.get("deliveries") or 0),
        warm=int(tag.get("warm") or 0),
        usd_s=float(tag.get("usd_s") or 0.0),
        gpus=int(tag.get("gpus") or 1),
        replica_timeout_s=int(tag.get("timeout") or 1800),
    )


@dataclass
class Reader:
    """One reader of a detached run: what the results queue and the job's executions say now."""

    cloud: Cloud
    run: QueueRun
    queues: Queues
    ledger: Ledger
    executions: dict[str, ExecutionInfo] = field(default_factory=dict)
    pending: int | None = None  # the items queue's approximate count at the last read

    def read(self) -> set[str]:
        ids = self.ledger.read(self.queues, self.run.results_queue, peek_s(self.run.size), take=False)
        for execution in self.cloud.list_executions(self.run.group, self.run.job):
            self.executions[execution.name] = execution
        self.pending = self.queues.length(self.run.work_queue)
        return ids

    def read_all(self, say: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> None:
        """Every result message, also those another reader holds invisible for a moment."""
        seen = self.read()
        for _ in range(READ_AGAIN):
            total = self.queues.length(self.run.results_queue) or 0
            if len(seen) >= total:
                return
            wait = peek_s(self.run.size)
            say(
                f"{total - len(seen)} of {total} result messages are held by another reader: reading "
                f"again in {wait} s, when they show again"
            )
            sleep(wait + 0.5)
            seen |= self.read()

    def drop_floor(self, say: Callable[[str], None]) -> str | None:
        """A warm run whose items are all done keeps no floor: minExecutions back to 0 (a PATCH,
        sent by every reader that sees it done: the same answer twice). None: no floor to drop."""
        if not self.run.warm or not self.ledger.done:
            return None
        try:
            self.cloud.set_event_floor(self.run.group, self.run.job, 0, self.run.replica_timeout_s)
        except AcaGpuError as exc:
            say(f"the warm floor of {self.run.warm} worker(s) was not dropped: {exc.message}")
            return "not dropped"
        say(f"every item is done: the warm floor of {self.run.warm} worker(s) is dropped (minExecutions 0)")
        return "dropped"

    def replica_seconds(self) -> float:
        now = datetime.now().astimezone()
        return sum(execution_seconds(e, now) for e in self.executions.values())

    def progress(self) -> str:
        return progress_text(self.ledger.counts(self.executions.values()), self.replica_seconds())

    def failure(self) -> AcaGpuError | None:
        failed = self.ledger.failed_indexes()
        if not failed:
            return None
        shown = ", ".join(map(str, failed[:20])) + (" ..." if len(failed) > 20 else "")
        if not self.ledger.done:
            return AcaGpuError(
                f"run {self.run.run_id} is not done: {len(failed)} of {self.ledger.size} items have no "
                f"final result yet ({self.ledger.final} done)",
                code="ItemsNotDone",
                hint=f"acagpu attach {self.run.run_id} follows it to the end",
            )
        return AcaGpuError(
            f"{len(failed)} of {self.ledger.size} items did not succeed: {shown}", code="ItemsFailed"
        )

    def document(
        self, command: str, *, interrupted: bool = False, floor: str | None = None
    ) -> dict[str, Any]:
        run, ledger = self.run, self.ledger
        error = self.failure()
        if interrupted:
            error = AcaGpuError(
                f"stopped following run {run.run_id}; its workers go on", code="Interrupted",
                hint=f"acagpu attach {run.run_id}",
            )  # fmt: skip
        replica_s = self.replica_seconds()
        done = ledger.done
        return {
            "schema": 1,
            "command": command,
            "mode": "queue",
            "run_id": run.run_id,
            "status": ("ok" if error is None else "items_failed") if done and not interrupted else "running",
            "exit_code": 130 if interrupted else (0 if error is None else 1),
            "exit_code_from": "acagpu",
            "queue": {
                "items": run.size,
                "workers": run.workers,
                "max_deliveries": run.deliveries,
                "warm": run.warm,
                "warm_floor": floor,
                "queues": [run.work_queue, run.results_queue, run.poison_queue],
                "waiting_messages": self.pending,
            },
            "storage_account": run.account,
            "environment": run.env,
            "summary": {
                **ledger.counts(self.executions.values()),
                "failed_indexes": ledger.failed_indexes() if done else [],
                "duplicate_successes": ledger.duplicates,
            },
            "items": ledger.item_docs(ledger.items.get),
            "workers": [
                {"execution": e.name, "status": e.status, "start_time": e.start_time, "end_time": e.end_time}
                for e in sorted(self.executions.values(), key=lambda e: e.start_time or "")
            ],
            "cost": {
                "gpu_seconds": round(replica_s * run.gpus, 3),
                "replica_seconds": round(replica_s, 3),
                "usd_estimate": round(replica_s * run.usd_s, 6),
                "basis": "estimate: each worker execution's lifetime (ARM's start to end) x the replica's "
                "price as the run's plan showed it",
            },
            "teardown": {
                "status": "detached",
                "message": f"`acagpu down --run-id {run.run_id}` removes its job and queues (reap and the "
                "guard do at its expiry)",
            },
            "errors": ledger.errors[-20:],
            "error": error.as_dict() if error is not None else None,
        }


def open_reader(cloud: Cloud, run_id: str) -> Reader:
    run = find_queue_run(cloud, run_id)
    return Reader(cloud, run, cloud.queues(run.env_group, run.account), Ledger.of(run.size))


def results(cloud: Cloud, run_id: str, say: Callable[[str], None]) -> dict[str, Any]:
    """The document now, done or not."""
    reader = open_reader(cloud, run_id)
    reader.read_all(say)
    return reader.document("results", floor=reader.drop_floor(say))


def attach(
    cloud: Cloud, run_id: str, say: Callable[[str], None], cancel: Any, *, tick_s: float = 1.0
) -> dict[str, Any]:
    """Live progress until every item is final (or `cancel` is set: the run goes on), then the
    document. A listing lost on the way is said and read again at the next tick."""
    reader = open_reader(cloud, run_id)
    say(f"following run {run_id}: {reader.run.size} items, at most {reader.run.workers} workers")
    shown, said, began = "", time.monotonic(), time.monotonic()
    while not cancel.is_set():
        try:
            reader.read()
        except AcaGpuError as exc:
            say(f"reading the run: {exc.message}; again in {tick_s:g} s")
        text = reader.progress()
        if text != shown or time.monotonic() - said >= HEARTBEAT_S:  # no silent wait
            still = "" if text != shown else f" (still; following for {time.monotonic() - began:.0f} s)"
            shown, said = text, time.monotonic()
            say(text + still)
        if reader.ledger.done:
            break
        cancel.wait(tick_s)
    floor = None
    if not cancel.is_set():
        reader.read_all(say)
        floor = reader.drop_floor(say)
    return reader.document("attach", interrupted=cancel.is_set(), floor=floor)


def render(doc: dict[str, Any]) -> str:
    """The last lines on a terminal: counts, the items that did not succeed, cost, what removes it."""
    s = doc["summary"]
    lines = [
        f"run {doc['run_id']} ({doc['status']}): {s['succeeded']} of {s['items']} items succeeded, "
        f"{s['poisoned']} poisoned, {s['waiting'] + s['retrying']} not final; {s['workers_started']} workers"
    ]
    for item in doc["items"]:
        if item["status"] in ("succeeded", "not_done"):
            continue
        code = f"exit {item['exit_code']}" if item["exit_code"] is not None else "no exit code"
        lines.append(f"  [{item['index']}] {item['status']}: {code}; {item['reason'] or ''}".rstrip("; "))
    cost = doc["cost"]
    lines.append(
        f"  cost ≈ {usd_text(cost['usd_estimate'])} for {gpu_seconds_text(cost['gpu_seconds'])} (estimate)"
    )
    lines.append(f"  {doc['teardown']['message']}")
    return "\n".join(lines)
