"""A queue run's results as the results queue tells them: one final result per item, in item order.

Both readers share it: the run that stays attached (it takes each result message and deletes it
once recorded) and a detached run's `acagpu attach` / `acagpu results` (they read the messages and
leave them: the results queue is the run's only record, read again from any machine). A result
message may be read many times, so recording is idempotent: one record per (item, delivery,
worker, status). A second success of one item (a worker that outlived its visibility timeout) is
recorded once and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aca_gpu.models import ExecutionInfo, Queues
from aca_gpu.workflow.queue.spec import decode

FINAL = ("succeeded", "poisoned")
PAGE = 32  # the most messages one receive returns (Azure Storage)


def execution_seconds(execution: ExecutionInfo, now: datetime) -> float:
    """An execution's lifetime so far, ARM's start to its end (or now)."""
    if not execution.start_time:
        return 0.0
    start = datetime.fromisoformat(execution.start_time.replace("Z", "+00:00"))
    end = datetime.fromisoformat(execution.end_time.replace("Z", "+00:00")) if execution.end_time else now
    return max(0.0, (end - start).total_seconds())


@dataclass
class Ledger:
    size: int  # how many items the run has
    items: dict[int, str] = field(default_factory=dict)  # item text, where known
    results: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> final (or last) result
    deliveries: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # index -> every result
    duplicates: int = 0
    errors: list[str] = field(default_factory=list)

    def record(self, doc: dict[str, Any]) -> None:
        index = int(doc["i"])
        if not 0 <= index < self.size:
            self.errors.append(f"a result for item {index}, which this run does not have")
            return
        if isinstance(doc.get("item"), str):
            self.items.setdefault(index, doc["item"])
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

    def read(self, queues: Queues, queue: str, visibility_s: int, *, take: bool) -> set[str]:
        """Every result message visible now, recorded; `take` deletes each once recorded (a lost
        delete shows it again, and recording is idempotent). Returns the ids of the messages read."""
        ids: set[str] = set()
        while True:
            found = queues.receive(queue, PAGE, visibility_s)
            new = [m for m in found if m.id not in ids]  # a short visibility shows a message again
            for message in new:
                ids.add(message.id)
                try:
                    doc = decode(message.text)
                except ValueError:
                    self.errors.append(f"a message on {queue} was not a result")
                else:
                    self.record(doc)
                if take:
                    queues.delete_message(queue, message)
            if len(found) < PAGE or not new:
                return ids

    @property
    def final(self) -> int:
        return sum(1 for r in self.results.values() if r["status"] in FINAL)

    @property
    def done(self) -> bool:
        return self.final >= self.size

    def failed_indexes(self) -> list[int]:
        return [k for k in range(self.size) if self.results.get(k, {}).get("status") != "succeeded"]

    def counts(self, executions: Iterable[ExecutionInfo]) -> dict[str, int]:
        statuses = [r["status"] for r in self.results.values()]
        listed = list(executions)
        return {
            "items": self.size,
            "succeeded": statuses.count("succeeded"),
            "poisoned": statuses.count("poisoned"),
            "retrying": statuses.count("failed"),
            "waiting": self.size - len(self.results),
            "workers_running": sum(1 for e in listed if not e.finished),
            "workers_started": len(listed),
        }

    def item_docs(self, item_of: Callable[[int], str | None]) -> list[dict[str, Any]]:
        found = []
        for k in range(self.size):
            last = self.results.get(k)
            found.append(
                {
                    "index": k,
                    "item": item_of(k),
                    "status": last["status"] if last else "not_done",
                    "exit_code": last.get("exit_code") if last else None,
                    "output": last.get("output") if last else None,
                    "seconds": last.get("seconds") if last else None,
                    "deliveries": max(
                        (int(d.get("delivery") or 0) for d in self.deliveries.get(k, [])), default=0
                    ),
                    "worker": last.get("worker") if last else None,
                    "reason": last.get("reason") if last else None,
                }
            )
        return found


def progress_text(counts: dict[str, int], replica_s: float) -> str:
    c = counts
    return (
        f"items {c['succeeded'] + c['poisoned']}/{c['items']} done: {c['succeeded']} succeeded, "
        f"{c['poisoned']} poisoned, {c['retrying']} retrying; {c['workers_running']} workers running "
        f"({c['workers_started']} started); {replica_s:.0f} replica-s so far"
    )
