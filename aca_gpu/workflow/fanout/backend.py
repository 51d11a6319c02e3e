"""Shards as ACA job executions: the `Backend` the task runner drives.

Each attempt is one `Jobs_Start` of the run's one job, with a `JobExecutionTemplate` whose env adds
the shard's variables and a token (`ACAGPU_ATTEMPT_ID`). One listing of the job's executions per
tick (the SDK's pager follows `nextLink`) tells every attempt's state; the token read back from each
execution's own template says whose it is. A shard's log is followed from its start with the same
follower `acagpu run` uses, its lines prefixed `[k]`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

from aca_gpu.models import Cloud, ContainerDef, ExecutionInfo, JobSpec
from aca_gpu.workflow.engine.executions import ExecutionRun, start_marked
from aca_gpu.workflow.engine.task_records import Observation, Task
from aca_gpu.workflow.fanout.spec import ATTEMPT, TOKEN


def exit_code_of(info: ExecutionInfo) -> int | None:
    codes = info.exit_codes if info.finished else ()
    return next((c for c in codes if c != 0), codes[0] if codes else None)


class AcaShards:
    """Starts, lists and stops one job's shard executions (see the module doc)."""

    def __init__(
        self,
        cloud: Cloud,
        resource_group: str,
        job: JobSpec,
        *,
        on_started: Callable[[Task, int, str], None] | None = None,
        streams: Mapping[str, ExecutionRun] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.cloud, self.rg, self.job = cloud, resource_group, job
        self._on_started = on_started
        self._streams = streams if streams is not None else {}  # execution -> its log follower's run
        self._names: dict[str, str] = {}  # token -> the execution its start answered with
        self._extras: dict[str, list[str]] = {}  # token -> other executions carrying it (stopped)
        self._dups: list[tuple[str, str, bool]] = []  # (token, execution, ended) found by a listing
        self._unsure: set[str] = set()  # tokens whose start went unanswered: listed on every page
        self._cancel = cancel
        self._lock = threading.Lock()
        self.listings = 0

    def template(self, task: Task, attempt: int) -> ContainerDef:
        base = self.job.container
        env = {**base.env, **task.env, ATTEMPT: str(attempt)}  # the token: `start_marked` adds it
        return replace(base, env=env)

    def start(self, task: Task, attempt: int, token: str) -> str:
        container = self.template(task, attempt)
        started = start_marked(self.cloud, self.rg, self.job.name, [container], token, self._cancel)
        name = started.execution
        with self._lock:
            self._names[token] = name
            self._extras[token] = list(started.extras)
            if started.unanswered:
                self._unsure.add(token)
        if self._on_started is not None:
            self._on_started(task, attempt, name)
        return name

    def extras_of(self, token: str) -> list[str]:
        """The other executions its start found carrying `token` (already stopped)."""
        with self._lock:
            return list(self._extras.get(token, ()))

    def observe(self, live: Collection[str] = ()) -> Mapping[str, tuple[str, Observation]]:
        """What the listing says of each attempt; it pages only until every `live` token was seen,
        or through every page while a live attempt's start went unanswered (an older copy of that
        start would list after it)."""
        found: dict[str, tuple[str, Observation]] = {}
        with self._lock:
            self._unsure &= set(live)
            every = bool(self._unsure)
        infos = self.cloud.executions_marked(self.rg, self.job.name, TOKEN, live, every=every)
        self.listings += 1
        with self._lock:
            names = dict(self._names)
        for info in infos:
            token = info.env.get(TOKEN)
            if not token:
                continue
            known = names.get(token)
            if known is not None and info.name != known:
                with self._lock:  # the same start twice: the one not answered with goes
                    extras = self._extras.setdefault(token, [])
                    if info.name not in extras:
                        extras.append(info.name)
                        self._dups.append((token, info.name, info.finished))
                continue
            seen = Observation(
                info.status, info.states, exit_code_of(info), _said(info), info.end_time, info.start_time
            )
            found[token] = (info.name, seen)
        return found

    def duplicates(self) -> list[tuple[str, str, bool]]:
        """(token, execution, ended) of each copy of a start found since the last call."""
        with self._lock:
            found, self._dups = self._dups, []
        return found

    def stop(self, execution: str) -> None:
        self.cloud.stop_execution(self.rg, self.job.name, execution)

    def stream_clock(self, execution: str) -> tuple[float | None, float | None]:
        """(start, end) of an attempt's container as its followed log stream saw them: the service
        accepting the stream is its start, and the stream's close after its last line its exit
        (`workload/follow.py`); (None, None) for an attempt not followed (`--logs none`)."""
        run = self._streams.get(execution)
        if run is None:
            return None, None
        began = None if run.attached_late else run.running  # a late stream saw no start
        # a stream that dropped, or an end read after failed status reads, saw the exit late
        clean = run.exit_by_close or (not run.drops and not run.status_misses)
        return began, run.ended if clean and run.info is not None and run.info.finished else None


def _said(info: ExecutionInfo) -> str | None:
    said = " ".join(filter(None, (info.reason, info.message)))
    return said or None
