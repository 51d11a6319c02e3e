"""A queue run's end: every item's result in item order, one exit code, one JSON document.

Exit codes (docs/queue.md): 0 only when every item succeeded. acagpu's own codes come first, as
for every run (130 Ctrl-C, 2/3 refused before anything ran, 6 something left behind, 7 the
platform). Then the items: 1 when any item was poisoned (its command failed K times, or its
workers ended mid-item K times) or has no result; the document and the last lines name them. An
item's exit code is never acagpu's: with N items there is no one code to pass on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.output import Output
from aca_gpu.units import gpu_seconds_text, usd_text
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Engine
from aca_gpu.workflow.fanout import ledger as records
from aca_gpu.workflow.queue.ledger import Ledger
from aca_gpu.workflow.queue.spec import QueueSpec
from aca_gpu.workflow.spend import ledger as spend_ledger
from aca_gpu.workflow.workload.masking import masker
from aca_gpu.workflow.workload.outcome import Console, WorkloadOutcome
from aca_gpu.workflow.workload.plan import RunRequest, replica_price

SHOWN_ITEMS = 20  # failed items named one a line on a terminal; the document has them all
WAIT_FOR_WORK_S = 30.0  # after Ctrl-C, how long the document waits for the watch to end


@dataclass
class QueueOutcome(WorkloadOutcome):
    queue: QueueSpec | None = None
    ledger: Ledger = field(default_factory=lambda: Ledger(()))
    drain_s: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    workers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ran: bool = False  # the watch began (the job existed)
    account: str | None = None  # the environment's storage account holding the run's queues
    clamp: dict[str, Any] | None = None  # --workers against the free GPU quota, as the preflight read it
    roles: list[str] = field(default_factory=list)  # the workers' role assignments (one per queue)

    def ended_on_its_own(self) -> bool:
        """The workers ran and the run ended with them: not stopped by Ctrl-C, by a failure of
        acagpu's or the platform's (the run's or its step's), nor before the job existed."""
        stopped = self.interrupted or self.error is not None or not self.ran
        return not stopped and not any(p.status == "error" for p in self.pairs)

    def failed_indexes(self) -> list[int]:
        """Items whose command failed; one without a result failed only when the run ended on its own.

        After Ctrl-C or the run's own failure, an item no worker finished is unfinished, not failed
        (as a fan-out's shards: docs/fanout.md), so a script does not blame the items for the stop.
        """
        results = self.ledger.results
        return [
            k
            for k in self.ledger.indexes
            if (k in results or self.ended_on_its_own()) and results.get(k, {}).get("status") != "succeeded"
        ]

    def unfinished_indexes(self) -> list[int]:
        """After Ctrl-C or a failure of the run's own: the items no worker finished."""
        if self.ended_on_its_own():
            return []
        return [k for k in self.ledger.indexes if k not in self.ledger.results]

    def items_error(self) -> AcaGpuError | None:
        if not self.ended_on_its_own():
            return None
        failed = self.failed_indexes()
        if not failed:
            return None
        shown = ", ".join(map(str, failed[:20])) + (" ..." if len(failed) > 20 else "")
        return AcaGpuError(
            f"{len(failed)} of {self.ledger.size} items did not succeed: {shown}",
            code="ItemsFailed",
        )

    @property
    def detached(self) -> bool:
        return self.teardown.status == "detached"

    @property
    def exit_code(self) -> int:
        if self.detached and self.error is None and not self.interrupted:
            return 0
        if not self.ended_on_its_own() or not self.teardown.clean or not self.ran:
            return super(WorkloadOutcome, self).exit_code
        error = self.items_error()
        return error.exit_code if error is not None else 0

    def failure(self) -> AcaGpuError | None:
        if self.detached and self.error is None and not self.interrupted:
            return None
        if not self.ended_on_its_own() or not self.teardown.clean or not self.ran:
            return super(WorkloadOutcome, self).failure()
        return self.items_error()

    @property
    def status(self) -> str:
        if self.detached and self.exit_code == 0:
            return "detached"
        if self.exit_code == 0:
            return "ok"
        if self.ended_on_its_own() and self.failed_indexes():
            return "items_failed"
        return super().status

    def cost(self) -> dict[str, Any]:
        assert self.queue is not None
        work = self.queue.run.workload
        profile = self.plan.pairs[0].profile
        per_s, _ = replica_price(profile, work.cpu, work.memory_gib, self.plan.location)
        replica_s = self.gpu_seconds
        return {
            "gpu_seconds": round(replica_s * profile.gpu_count, 3),
            "replica_seconds": round(replica_s, 3),
            "usd_estimate": round(per_s * replica_s, 6),
            "basis": "estimate: each worker execution's lifetime (ARM's start to end) x the replica's price",
        }

    def item_docs(self) -> list[dict[str, Any]]:
        assert self.queue is not None
        items = dict(zip(self.queue.item_indexes, self.queue.items, strict=True))
        return self.ledger.item_docs(items.get)

    def document(self) -> dict[str, Any]:
        assert self.queue is not None and self.spec is not None
        error = self.failure()
        return {
            "schema": 1,
            "command": "run",
            "mode": "queue",
            "run_id": self.plan.run_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "exit_code_from": "acagpu",
            **self.spec.as_dict(),
            **self.queue.as_dict(),
            "storage_account": self.account,
            "worker_roles": self.roles,
            "workers_quota": self.clamp,
            "summary": {
                **self.counts,
                "failed_indexes": self.failed_indexes(),
                "unfinished_indexes": self.unfinished_indexes(),  # also before the job existed
                "duplicate_successes": self.ledger.duplicates,
                "drain_s": self.drain_s,
            },
            "items": self.item_docs(),
            "workers": self.workers,
            "phases": dict(self.phases),
            "timings": dict(self.timings),
            "cost": self.cost(),
            "teardown": self.teardown.as_dict(),
            "attempts": [a.as_dict() for a in self.attempts],
            "errors": self.errors[-20:],
            "error": error.as_dict() if error is not None else None,
        }


def run_queue(
    cloud: Cloud,
    queue: QueueSpec,
    output: Output,
    waiter: Waiter,
    *,
    tick_s: float = 1.0,
    request: RunRequest | None = None,
) -> QueueOutcome:
    """Drain every item of `queue`; never raises for the cloud's failures (they are in the outcome)."""
    from dataclasses import replace

    from aca_gpu.workflow.queue.aca import queue_runtime_for

    console = Console(False, lambda: output.stdout, lambda: output.stderr)
    console.mask = masker(queue.run.workload.secret_values.values())  # items' outputs hide them too

    def say(text: str) -> None:
        if not output.is_json:
            print(f"  {text}", file=output.stderr, flush=True)

    plan, runtime = queue_runtime_for(cloud, queue.run.plan, waiter, queue, console, say, tick_s)
    queue = replace(queue, run=replace(queue.run, plan=plan))
    runtime.queue = queue
    outcome = QueueOutcome(plan=plan, runtime="aca", spec=queue.run, console=console, queue=queue)
    Engine(plan, runtime, output, waiter, outcome=outcome).run()
    if runtime.job is not None and not runtime.done.wait(WAIT_FOR_WORK_S):
        outcome.errors.append("the queue's watch had not ended when the run did")
    outcome.ran = runtime.job is not None
    outcome.queue = runtime.queue  # --workers as the preflight clamped it to the GPU quota
    outcome.clamp = runtime.clamp
    outcome.account = runtime.account
    outcome.roles = list(runtime.roles)
    outcome.ledger = runtime.ledger
    outcome.drain_s = runtime.drain_s
    outcome.counts = runtime.counts()
    outcome.errors += runtime.errors
    outcome.workers = [
        {"execution": e.name, "status": e.status, "start_time": e.start_time, "end_time": e.end_time}
        for e in sorted(runtime.executions.values(), key=lambda e: e.start_time or "")
    ]
    spend_ledger.record(cloud, outcome)
    if request is not None:  # this machine's record, for `--rerun-failed` (never a secret's value)
        records.save(request, {"workers": queue.workers, "max_deliveries": queue.max_deliveries},
                     outcome.document())  # fmt: skip
    return outcome


def render_queue(doc: dict[str, Any]) -> str:
    """The last lines on a terminal: counts, the items that did not succeed, cost, teardown."""
    s = doc["summary"]
    if doc["status"] == "detached":
        run = doc["run_id"]
        return "\n".join(
            [
                f"run {run} detached: {s.get('items', 0)} items queued; at most {doc['queue']['workers']} "
                "workers drain them without this machine",
                f"  follow:  acagpu attach {run}",
                f"  results: acagpu results {run}   (any time, from any machine with the same rights)",
                f"  remove:  acagpu down --run-id {run}   (its job and queues; reap and the guard do it at "
                "its expiry)",
            ]
        )
    lines = [
        f"run {doc['run_id']}: {s.get('succeeded', 0)} of {s.get('items', 0)} items succeeded "
        f"({s.get('workers_started', 0)} workers)"
    ]
    failed = [i for i in doc["items"] if i["status"] not in ("succeeded", "not_done")]
    for item in failed[:SHOWN_ITEMS]:
        code = f"exit {item['exit_code']}" if item["exit_code"] is not None else "no exit code"
        lines.append(f"  [{item['index']}] {item['status']}: {code}; {item['reason'] or ''}".rstrip("; "))
    if len(failed) > SHOWN_ITEMS:
        lines.append(f"  ... and {len(failed) - SHOWN_ITEMS} more (-o json lists every item)")
    waiting = [i["index"] for i in doc["items"] if i["status"] == "not_done"]
    if waiting:  # one line, however many: a stopped run of 10,000 items printed 10,000 of them
        lines.append(f"  {len(waiting)} item(s) not done: {spans(waiting)}")
    cost = doc["cost"]
    lines.append(
        f"  cost ≈ {usd_text(cost['usd_estimate'])} for {gpu_seconds_text(cost['gpu_seconds'])} (estimate)"
    )
    lines.append(f"  teardown: {doc['teardown'].get('status')}")
    return "\n".join(lines)


def spans(indexes: list[int], most: int = 8) -> str:
    """`0-11, 14, 20-22`: sorted indexes as runs, the first `most` of them, then how many more."""
    runs: list[list[int]] = []
    for k in sorted(indexes):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    text = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs[:most])
    return text + (f", ... ({len(runs) - most} more ranges)" if len(runs) > most else "")
