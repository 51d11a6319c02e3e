"""Queue mode (`acagpu run --map ITEMS --workers P`), checked before anything exists (exit 2).

`--map` alone is a fan-out: one execution per item, each paying its own start. With `--workers P`
the items go on a Storage queue of the run instead and at most P workers (executions of one Event
job that KEDA's azure-queue rule scales) drain it, one item after another, so a worker pays its
start once for many items. What differs is only how the items reach a container; the item is
`ACAGPU_ITEM` either way (and its index `ACAGPU_ITEM_INDEX`).

A message carries `{"i": index, "item": text}` (JSON, UTF-8) as base64 (XML-safe); the Storage
service takes 64 KiB a message, so an item may be up to ~48 KiB (what fits after base64 and the
envelope). An item whose message would be larger is refused here, with the hint to pass a path or
a key instead.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.naming import run_queue_names
from aca_gpu.workflow.fanout.spec import read_items
from aca_gpu.workflow.workload.plan import RunSpec

MAX_MESSAGE_BYTES = 64 * 1024  # Azure Storage queues: one message, as the service counts it
MAX_WORKERS = 1000  # an Event job's maxExecutions (ACA's documented upper bound is not lower)
DEFAULT_DELIVERIES = 3
DEFAULT_VISIBILITY_S = 60  # renewed every 20 s while an item runs (the worker)
DEFAULT_POLLING_S = 30  # ACA's default pollingInterval for an Event job
DEFAULT_WARM_IDLE_S = 300  # GPU workers bill while they wait
QUEUE_LENGTH = 1  # KEDA's queueLength: one worker per waiting item, up to P


@dataclass(frozen=True)
class QueueSpec:
    run: RunSpec
    items: tuple[str, ...]
    workers: int  # P: the Event job's maxExecutions
    max_deliveries: int = DEFAULT_DELIVERIES  # K: a message delivered more often goes to the poison queue
    visibility_s: int = DEFAULT_VISIBILITY_S
    polling_s: int = DEFAULT_POLLING_S
    warm: int = 0  # minExecutions: workers kept waiting
    warm_idle_s: int = DEFAULT_WARM_IDLE_S  # with a floor: how long a worker waits for an item
    detach: bool = False  # return once the items are queued and the job exists (docs/queue.md)
    indexes: tuple[int, ...] = ()  # each item's index in the original ITEMS (a rerun's); () = 0..N-1
    rerun_of: str | None = None

    @property
    def run_id(self) -> str:
        return self.run.plan.run_id

    @property
    def queues(self) -> tuple[str, str, str]:
        return run_queue_names(self.run_id)

    @property
    def work_queue(self) -> str:
        return self.queues[0]

    @property
    def results_queue(self) -> str:
        return self.queues[1]

    @property
    def poison_queue(self) -> str:
        return self.queues[2]

    @property
    def item_indexes(self) -> tuple[int, ...]:
        return self.indexes or tuple(range(len(self.items)))

    def messages(self) -> list[str]:
        return [encode(k, item) for k, item in zip(self.item_indexes, self.items, strict=True)]

    def price(self) -> dict[str, Any]:
        """Per second of one worker, at P, and the floor's cost per hour (--warm)."""
        per_s = float(self.run.price()["usd_per_second"])
        return {
            "usd_per_second_per_worker": round(per_s, 7),
            "usd_per_second_at_workers": round(per_s * min(self.workers, len(self.items)), 7),
            "warm_floor_usd_per_hour": round(per_s * 3600 * self.warm, 4),
            "warm_idle_s": self.warm_idle_s if self.warm else 0,
            "rounds_at_workers": math.ceil(len(self.items) / self.workers),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": {
                "items": len(self.items),
                "workers": self.workers,
                "max_deliveries": self.max_deliveries,
                "visibility_timeout_s": self.visibility_s,
                "polling_interval_s": self.polling_s,
                "warm": self.warm,
                "warm_idle_s": self.warm_idle_s if self.warm else 0,
                "queues": list(self.queues),
                "rerun_of": self.rerun_of,
            },
            "queue_price": self.price(),
        }


def queue_tag(queue: QueueSpec, account: str) -> str:
    """The Event job's `acagpu:queue` tag: what a reader on another machine needs (`acagpu attach`,
    `results`, `down`): the account holding the queues, how many items, P, K, the floor, the
    price per second of one worker as the plan showed it, and GPUs per worker. Under 256 chars."""
    gpus = queue.run.plan.pairs[0].profile.gpu_count
    per_s = float(queue.run.price()["usd_per_second"])
    return (
        f"account={account};items={len(queue.items)};workers={queue.workers};"
        f"deliveries={queue.max_deliveries};warm={queue.warm};idle={queue.warm_idle_s};usd_s={per_s:.7f};"
        f"gpus={gpus}"
    )


def encode(index: int, item: str, rerun: int = 0) -> str:
    """An item's message; `rerun` n > 0: put back by the n-th `--rerun-failed` of a detached run."""
    body: dict[str, Any] = {"i": index, "item": item, **({"r": rerun} if rerun else {})}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def decode(text: str) -> dict[str, Any]:
    """A worker's result message: {"i", "status", "delivery", "worker", "exit_code", ...}, or a
    requeue's marker {"i": -1, "requeued": [...], "r": n}."""
    doc = json.loads(base64.b64decode(text))
    if not isinstance(doc, dict) or not isinstance(doc.get("i"), int):
        raise ValueError("not a result of this run")
    return doc


def make_queue_spec(
    run: RunSpec,
    *,
    map_file: str | None,
    workers: int,
    max_deliveries: int = DEFAULT_DELIVERIES,
    visibility_s: int = DEFAULT_VISIBILITY_S,
    polling_s: int = DEFAULT_POLLING_S,
    warm: int = 0,
    warm_idle_s: int = DEFAULT_WARM_IDLE_S,
    detach: bool = False,
    items: tuple[str, ...] | None = None,
    indexes: tuple[int, ...] = (),
    rerun_of: str | None = None,
) -> QueueSpec:
    """Every queue-mode value checked (BadInput, one line) before anything is created. `items`
    (with their original `indexes`) instead of `map_file`: a rerun's failed items."""
    if map_file is None and items is None:
        raise BadInput("--workers P drains --map ITEMS through a queue: give --map FILE too")
    if run.local:
        raise BadInput("--workers runs on ACA: leave out --runtime (local runtimes run one container)")
    if run.plan.env is None:
        raise BadInput(
            "--workers needs a warm environment (--env NAME): the queues live in its storage account"
        )
    if not run.workload.command:
        raise BadInput(
            "--workers needs the command after `--` (IMAGE -- CMD ...): the worker runs it once per item"
        )
    if not 1 <= workers <= MAX_WORKERS:
        raise BadInput(f"--workers {workers}: use 1 to {MAX_WORKERS}")
    if not 1 <= max_deliveries <= 100:
        raise BadInput(f"--max-deliveries {max_deliveries}: use 1 to 100")
    if not 0 <= warm <= workers:
        raise BadInput(f"--warm {warm}: 0 to --workers ({workers})")
    if not 1 <= warm_idle_s <= 3600:
        raise BadInput(f"--warm-idle {warm_idle_s}: 1 to 3600 seconds")
    if items is None:
        assert map_file is not None
        items = read_items(map_file, max_item_bytes=None)
    for k, item in zip(indexes or range(len(items)), items, strict=True):
        size = len(encode(k, item))
        if size > MAX_MESSAGE_BYTES:
            raise BadInput(
                f"--map {map_file}: item {k} would be a {size}-byte queue message (base64), over the "
                f"{MAX_MESSAGE_BYTES} one message may hold: pass a path or a key instead and read the data "
                "in the command"
            )
    return QueueSpec(
        run=run,
        items=items,
        workers=workers,
        max_deliveries=max_deliveries,
        visibility_s=visibility_s,
        polling_s=polling_s,
        warm=warm,
        warm_idle_s=warm_idle_s,
        detach=detach,
        indexes=indexes,
        rerun_of=rerun_of,
    )
