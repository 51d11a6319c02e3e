"""The Python API of queue mode: `acagpu.map(..., workers=P)`, attached or detached.

    import acagpu
    result = acagpu.map("ghcr.io/me/embed:1", items, command=["python3", "embed.py"], env="lab", workers=8)
    for item in result.items:           # in item order
        print(item.index, item.status, item.exit_code, item.output)
    result.raise_for_failures()         # QueueFailed naming the items that did not succeed

    run = acagpu.map(IMAGE, items, command=CMD, env="lab", workers=8, detach=True)   # seconds
    run.status()                        # counts now: done, succeeded, poisoned, waiting, workers
    result = run.wait(timeout_s=3600)   # until every item is final (the run goes on past a timeout)
    result = run.results()              # the document now, done or not
    run.remove()                        # its job, role assignments and queues (as `down --run-id`)
    acagpu.QueueRun("a1b2c3").results() # the same run from another process or machine

`map(..., workers=P)` builds the same RunRequest and QueueSpec as `acagpu run --map ITEMS --workers
P` (bad input raises `BadInput` before anything exists) and calls the same `run_queue`: attached, it
returns once every item is final and the run is torn down; with `detach=True`, once the items are
queued and the Event job exists, as `--detach`. A `QueueRun` needs nothing local: it reads the run
through Azure as `acagpu attach`/`results` do (workflow/queue/detached.py).
"""

from __future__ import annotations

import inspect
import io
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, overload

from aca_gpu.errors import AcaGpuError, BadInput, WaitTimedOut
from aca_gpu.output import Output
from aca_gpu.workflow.base.api import RunResult, container_fields, item_texts, run_fields
from aca_gpu.workflow.fanout import api as fanout_api


@dataclass(frozen=True)
class ItemResult:
    index: int
    status: str  # succeeded | poisoned | failed (a delivery failed, more may come) | not_done
    item: str | None = None
    exit_code: int | None = None
    output: str | None = None  # the last 2 KiB of the command's output
    seconds: float | None = None
    deliveries: int = 0
    worker: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"


class QueueFailed(AcaGpuError):
    """Raised by `QueueResult.raise_for_failures` (exit code as the CLI's)."""


@dataclass(frozen=True)
class QueueResult(RunResult):
    """A queue run's document, typed: every item in item order."""

    run_id: str
    status: str  # ok | items_failed | running (results() before the end) | detached | ...
    exit_code: int
    items: tuple[ItemResult, ...]
    cost_usd: float
    gpu_seconds: float
    error: dict[str, Any] | None = None
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    failure: ClassVar[type[AcaGpuError]] = QueueFailed
    failure_code: ClassVar[str] = "ItemsFailed"

    @property
    def done(self) -> bool:
        return all(i.status in ("succeeded", "poisoned") for i in self.items)

    @property
    def failed(self) -> list[int]:
        return [i.index for i in self.items if not i.ok]


def result_of(doc: dict[str, Any]) -> QueueResult:
    fields = ItemResult.__dataclass_fields__
    items = tuple(ItemResult(**{k: v for k, v in i.items() if k in fields}) for i in doc.get("items") or [])
    return QueueResult(items=tuple(sorted(items, key=lambda i: i.index)), **run_fields(doc))


@dataclass(frozen=True)
class QueueStatus:
    """A detached run's counts now (`QueueRun.status()`)."""

    run_id: str
    done: bool
    items: int
    succeeded: int
    poisoned: int
    retrying: int
    waiting: int
    workers_running: int
    workers_started: int
    gpu_seconds: float
    cost_usd: float


class QueueRun:
    """A detached queue run, by its id: read through Azure, nothing local needed (settings come from
    the same places as the CLI's: ACAGPU_* variables, the config file)."""

    def __init__(self, run_id: str, *, echo: bool = False) -> None:
        from aca_gpu import naming

        naming.validate_run_id(run_id)
        self.run_id, self.echo = run_id, echo

    def __repr__(self) -> str:
        return f"QueueRun({self.run_id!r})"

    def _cloud(self) -> Any:
        from aca_gpu.config import load_settings
        from aca_gpu.workflow.base.context import open_cloud

        return open_cloud(load_settings())

    def _say(self, text: str) -> None:
        if self.echo:
            print(f"  {text}", file=sys.stderr, flush=True)

    def results(self) -> QueueResult:
        """The run's document now, done or not (`acagpu results`); never deletes a result."""
        from aca_gpu.workflow.queue.detached import results

        return result_of(results(self._cloud(), self.run_id, self._say))

    def status(self) -> QueueStatus:
        """The counts now: one read of the results queue and of the job's executions."""
        from aca_gpu.workflow.queue.detached import open_reader

        reader = open_reader(self._cloud(), self.run_id)
        reader.read_all(self._say)
        counts = reader.ledger.counts(reader.executions.values())
        replica_s = reader.replica_seconds()
        return QueueStatus(
            run_id=self.run_id,
            done=reader.ledger.done,
            items=counts["items"],
            succeeded=counts["succeeded"],
            poisoned=counts["poisoned"],
            retrying=counts["retrying"],
            waiting=counts["waiting"],
            workers_running=counts["workers_running"],
            workers_started=counts["workers_started"],
            gpu_seconds=round(replica_s * reader.run.gpus, 3),
            cost_usd=round(replica_s * reader.run.usd_s, 6),
        )

    def wait(self, timeout_s: float | None = None, *, poll_s: float = 1.0) -> QueueResult:
        """Follow the run until every item is final (`acagpu attach`), then its result. Past
        `timeout_s` it raises WaitTimedOut (exit 4) naming what is not done; the run goes on."""
        from aca_gpu.workflow.queue.detached import attach

        stop = threading.Event()
        timer = threading.Timer(timeout_s, stop.set) if timeout_s is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            doc = attach(self._cloud(), self.run_id, self._say, stop, tick_s=poll_s)
        finally:
            if timer is not None:
                timer.cancel()
        if stop.is_set():
            summary = doc.get("summary") or {}
            done = int(summary.get("succeeded") or 0) + int(summary.get("poisoned") or 0)
            raise WaitTimedOut(
                f"run {self.run_id}: {done} of {summary.get('items')} items final after {timeout_s:g} s; "
                "its workers go on",
                hint=f"acagpu attach {self.run_id}",
            )
        return result_of(doc | {"command": "results"})

    def remove(self) -> dict[str, Any]:
        """Remove the run as `acagpu down --run-id` does (its group billing first, then its workers'
        role assignments and its queues); the `down` document."""
        from aca_gpu.config import load_settings
        from aca_gpu.output import NullProgress
        from aca_gpu.workflow.base.context import RunRef, Waiter
        from aca_gpu.workflow.fleet.down import down

        settings = load_settings()
        done = down(self._cloud(), RunRef(run_id=self.run_id), NullProgress(),
                    Waiter(interval=settings.polling_interval), wait=False)  # fmt: skip
        if done.exit_code:
            error = AcaGpuError(str((done.doc.get("error") or {}).get("message") or "not removed"),
                                code="TeardownIncomplete")  # fmt: skip
            error.exit_code = done.exit_code
            raise error
        return done.doc


def map_queue(
    image: str,
    items: Iterable[Any],
    command: Sequence[str],
    *,
    workers: int,
    detach: bool = False,
    max_deliveries: int = 3,
    warm: int = 0,
    warm_idle: int = 300,
    env: str | None = None,
    gpu: str | None = None,
    max_minutes: int | None = None,
    env_vars: dict[str, str] | None = None,
    secret_env: Sequence[str] = (),
    cpu: float | None = None,
    memory: str | None = None,
    mounts: Sequence[str] = (),
    run_id: str | None = None,
    ttl: str | None = None,
    echo: bool = False,
) -> QueueResult | QueueRun:
    """Queue mode for `acagpu.map(..., workers=P)` (module doc)."""
    from dataclasses import replace

    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import Waiter, open_cloud, resolve_owner
    from aca_gpu.workflow.env.warm_runtime import placed_plan
    from aca_gpu.workflow.queue.outcome import run_queue
    from aca_gpu.workflow.queue.spec import make_queue_spec
    from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

    listed = item_texts(items)
    if not listed:
        raise BadInput("workers=P drains items through a queue: give at least one item")
    container = container_fields(image, command, env=env, env_vars=env_vars, secret_env=secret_env,
                                 mounts=mounts, cpu=cpu, memory=memory)  # fmt: skip
    request = RunRequest(**container, gpu=gpu, run_id=run_id, ttl=ttl, max_minutes=max_minutes)
    settings = load_settings()
    spec = make_run_spec(settings, request, owner=resolve_owner(settings))
    queue = make_queue_spec(spec, map_file=None, items=listed, workers=workers, max_deliveries=max_deliveries,
                            detach=detach, warm=warm, warm_idle_s=warm_idle)  # fmt: skip
    cloud = open_cloud(settings)
    queue = replace(queue, run=replace(queue.run, plan=placed_plan(cloud, queue.run.plan)))
    sink: Any = sys.stderr if echo else io.StringIO()
    output = Output("table" if echo else "json", stdout=sink, stderr=sink, command="run")
    outcome = run_queue(cloud, queue, output, Waiter(interval=settings.polling_interval), request=request)
    doc = outcome.document()
    if not detach:
        return result_of(doc)
    if doc["status"] != "detached":  # it never got as far as its workers: nothing to follow
        failure = outcome.failure() or AcaGpuError(f"run {doc['run_id']} was not detached ({doc['status']})")
        raise failure
    return QueueRun(doc["run_id"], echo=echo)


QUEUE_OPTIONS = frozenset(inspect.signature(map_queue).parameters) - {"image", "items", "command"}


@overload
def map(
    image: str, items: Iterable[Any], command: Sequence[str] = (), *, workers: None = None, **options: Any
) -> fanout_api.FanoutResult: ...
@overload
def map(
    image: str,
    items: Iterable[Any],
    command: Sequence[str] = (),
    *,
    workers: int,
    detach: Literal[False] = False,
    **options: Any,
) -> QueueResult: ...
@overload
def map(
    image: str,
    items: Iterable[Any],
    command: Sequence[str] = (),
    *,
    workers: int,
    detach: Literal[True],
    **options: Any,
) -> QueueRun: ...
def map(
    image: str,
    items: Iterable[Any],
    command: Sequence[str] = (),
    *,
    workers: int | None = None,
    detach: bool = False,
    **options: Any,
) -> fanout_api.FanoutResult | QueueResult | QueueRun:
    """One result per item (`ACAGPU_ITEM`; non-strings as JSON), in item order. Without `workers`
    a fan-out, one execution per item (`acagpu.run`'s options); with `workers=P` queue mode (a
    QueueResult, or with `detach=True` a QueueRun to follow). The name shadows the builtin on
    purpose: `acagpu.map` reads as Modal's and Python's own `map`."""
    if workers is None:
        if detach:
            raise BadInput("detach=True belongs to queue mode: add workers=P")
        return fanout_api.map(image, items, command, **options)
    stray = sorted(set(options) - QUEUE_OPTIONS)
    if stray:
        raise BadInput(
            f"workers=P drains a queue: {', '.join(stray)} belong to a fan-out (leave out workers)"
        )
    return map_queue(image, items, command, workers=workers, detach=detach, **options)
