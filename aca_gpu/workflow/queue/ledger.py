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
    indexes: tuple[int, ...]  # the run's items, by their index in the original ITEMS
    items: dict[int, str] = field(default_factory=dict)  # item text, where known
    results: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> final (or last) result
    deliveries: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # index -> every result
    generation: dict[int, int] = field(default_factory=dict)  # index -> its latest requeue (0: none)
    errors: list[str] = field(default_factory=list)
    mask: Callable[[str], str] | None = None  # hides the run's --secret-env values in what is kept

    @classmethod
    def of(cls, size: int) -> Ledger:
        return cls(tuple(range(size)))

    def __post_init__(self) -> None:
        self._known = frozenset(self.indexes)

    @property
    def size(self) -> int:
        return len(self.indexes)

    def record(self, doc: dict[str, Any]) -> None:
        """One message of the results queue: a worker's result, or a requeue's marker
        (`{"requeued": [k, ...], "r": n}`: those items' earlier results no longer count)."""
        if isinstance(doc.get("requeued"), list):
            r = int(doc.get("r") or 0)
            for index in doc["requeued"]:
                if int(index) in self._known and r > self.generation.get(int(index), 0):
                    self.generation[int(index)] = r
                    self._settle(int(index))
            return
        index = int(doc["i"])
        if index not in self._known:
            self.errors.append(f"a result for item {index}, which this run does not have")
            return
        if self.mask is not None:
            doc.update({k: self.mask(doc[k]) for k in ("output", "reason") if isinstance(doc.get(k), str)})
        if isinstance(doc.get("item"), str):
            self.items.setdefault(index, doc["item"])
        seen = self.deliveries.setdefault(index, [])
        key = (doc.get("delivery"), doc.get("worker"), doc.get("status"), doc.get("r"))
        if any((d.get("delivery"), d.get("worker"), d.get("status"), d.get("r")) == key for d in seen):
            return
        seen.append(doc)
        self._settle(index)

    def _current(self, index: int) -> list[dict[str, Any]]:
        """The item's results since its latest requeue."""
        since = self.generation.get(index, 0)
        return [d for d in self.deliveries.get(index, []) if int(d.get("r") or 0) >= since]

    def _settle(self, index: int) -> None:
        """Its result: a success wins (a second one is a duplicate), then poisoned, then the last
        failure; none since its latest requeue: not done."""
        current = self._current(index)
        pick = next((d for d in current if d.get("status") == "succeeded"), None)
        pick = pick or next((d for d in current if d.get("status") == "poisoned"), None)
        pick = pick or (current[-1] if current else None)
        if pick is None:
            self.results.pop(index, None)
        else:
            self.results[index] = pick

    @property
    def duplicates(self) -> int:
        """Successes of one item past its first (a worker that outlived its visibility timeout)."""
        return sum(
            max(0, sum(1 for d in self._current(k) if d.get("status") == "succeeded") - 1)
            for k in self.deliveries
        )

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
        return [k for k in self.indexes if self.results.get(k, {}).get("status") != "succeeded"]

    def counts(self, executions: Iterable[ExecutionInfo]) -> dict[str, int]:
        statuses = [r["status"] for r in self.results.values()]
        listed = list(executions)
        return {
            "items": self.size,
            "succeeded": statuses.count("succeeded"),
            "poisoned": statuses.count("poisoned"),
            "retrying": statuses.count("failed"),
            "waiting": self.size - sum(1 for k in self.indexes if k in self.results),
            "workers_running": sum(1 for e in listed if not e.finished),
            "workers_started": len(listed),
        }

    def item_docs(self, item_of: Callable[[int], str | None]) -> list[dict[str, Any]]:
        found = []
        for k in self.indexes:
            last = self.results.get(k)
            found.append(
                {
                    "index": k,
                    "item": item_of(k),
                    "status": last["status"] if last else "not_done",
                    "exit_code": last.get("exit_code") if last else None,
                    "output": last.get("output") if last else None,
                    "seconds": last.get("seconds") if last else None,
                    "deliveries": max((int(d.get("delivery") or 0) for d in self._current(k)), default=0),
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
