"""Follow one job execution's console lines to its end: the log stream first, Log Analytics after.

ACA removes a finished job replica, and its log stream with it, within seconds (how many is not
established), so a container that prints and exits at once can end before any stream is read.
What this does about it, in order:
1. the stream is attached as early as Azure allows (`Cloud.job_log_records`: the replica's endpoint
   is listed while its image pulls; a container not yet started is asked again every 0.1 s);
2. a dropped stream is reconnected; what a reconnect replays is skipped by (timestamp, stream, text)
   counts, so no line is lost or doubled;
3. when the stream could not be attached before the replica ended, or broke off at the end, the
   lines are read from the environment's Log Analytics workspace (where its console lines are
   ingested 20 s to 3 min later) and the ones the stream did not show are delivered, each once
   (a line counts as shown while the stream gave as many copies of the same stream and text).
   The wait ends when the workspace has the platform's record of the execution's end (its lines
   came before it), when the same lines came twice in a row, or after LOGS_WAIT_S.
Every line says where it came from (`stream` or `log-analytics`). One execution per call: the run
follows one; a fan-out follows each of its shards with it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError, WaitTimedOut
from aca_gpu.models import Cloud, ExecutionInfo
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.executions import ExecutionRun

STREAM, LOG_ANALYTICS = "stream", "log-analytics"
LOG_RECONNECTS = 20
RETRY_S = 0.2
LOGS_WAIT_S = 180.0  # Microsoft's typical ingestion latency tops out at 3 min
LOGS_POLL_MIN_S, LOGS_POLL_MAX_S = 1.0, 10.0
LOGS_SETTLE_POLLS = 2  # the same rows this many reads in a row: ingestion has caught up

Emit = Callable[[str, str, str], None]  # (stdout|stderr, text, source)


@dataclass
class Followed:
    """What following one execution gave: its lines with their sources, and how the reading went."""

    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (stream, text, source)
    stream_complete: bool = False  # the stream was read to the container's end
    from_logs: int = 0  # lines only Log Analytics had
    notes: list[str] = field(default_factory=list)  # what the user should know about the output

    def count(self, source: str) -> int:
        return sum(1 for _, _, s in self.lines if s == source)


def follow_execution(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: ExecutionRun,
    waiter: Waiter,
    *,
    timeout: float,
    emit: Emit,
    note: Callable[[str], None],
    logs_workspace: Callable[[], str | None],
    logs_wait_s: float = LOGS_WAIT_S,
) -> Followed:
    """Every line of the execution once, in order, until it ends (or `timeout`, or Ctrl-C: then
    WaitTimedOut("Cancelled")). `logs_workspace` names the environment's Log Analytics workspace
    (None when its lines go nowhere else): asked only when the stream fell short. `run.info` holds
    the execution's status when it was seen finished."""
    followed = Followed()
    delivered: Counter[Hashable] = Counter()  # by (timestamp, stream, text): a reconnect's replay
    shown: Counter[tuple[str, str]] = Counter()  # by (stream, text): what the fallback skips

    def deliver(stream: str, text: str, source: str) -> None:
        if run.first_line is None and source == STREAM:  # a line read later says nothing of when it ran
            run.first_line = time.monotonic()
        followed.lines.append((stream, text, source))
        shown[(stream, text)] += 1
        emit(stream, text, source)

    def say(text: str) -> None:
        followed.notes.append(text)
        note(text)

    deadline = time.monotonic() + timeout
    failures = 0
    # the container's exit: when the service first ended a connection after its last new line. The
    # execution says it finished only once the ended replica has gone (half a second or more on),
    # and the replica stopped billing at the exit.
    closes: dict[str, Any] = {"fresh": True, "at": None}

    def closed() -> None:
        if closes["fresh"] or closes["at"] is None:
            closes["fresh"], closes["at"] = False, time.monotonic()

    while True:
        _cancelled(waiter)
        replay: Counter[Hashable] = Counter()
        clean = False
        try:
            for stamp, stream, text in cloud.job_log_records(
                resource_group,
                job,
                run.execution,
                timeout=max(1.0, deadline - time.monotonic()),
                on_running=lambda at=None: _seen_running(run, at),
                on_closed=closed,
                on_late=lambda: setattr(run, "attached_late", run.running is None or run.attached_late),
            ):
                key = (stamp, stream, text) if stamp is not None else ("raw", stream, text)
                replay[key] += 1
                if replay[key] <= delivered[key]:
                    continue  # replayed by a new connection: already shown
                delivered[key] += 1
                closes["fresh"] = True
                deliver(stream, text, STREAM)
                _cancelled(waiter)
            clean = True
        except WaitTimedOut:
            raise
        except AcaGpuError as exc:
            failures += 1
            run.drops += 1  # an end seen after a drop is seen late (engine/lifetime.py)
            run.lost = exc.message
        info = _execution(cloud, resource_group, job, run.execution)
        run.status_misses += info is None
        if info is None and _job_gone(cloud, resource_group, job):
            _cancelled(waiter)  # after Ctrl-C the run's own teardown deleted it: that is no news
            run.gone = time.monotonic()  # deleted under the run (`env delete --force`): billed until now
            return followed
        if info is not None and info.finished:
            run.info = info
            # the container's exit: the end of the stream that brought its last lines, else now
            exited = closes["at"] if clean and not closes["fresh"] else None
            run.exit_by_close = run.ended is None and exited is not None
            run.ended = run.ended or exited or time.monotonic()
            followed.stream_complete = clean
            if not clean and not _never_started(run, info, shown):
                place = logs_workspace()
                _from_log_analytics(cloud, job, run, waiter, place, shown, deliver, say, logs_wait_s)
                followed.from_logs = followed.count(LOG_ANALYTICS)
            return followed
        if clean and not closes["fresh"]:  # that close was no exit (a cut): the next one may be
            closes["fresh"], closes["at"] = True, None
        if failures > LOG_RECONNECTS or time.monotonic() >= deadline:
            return followed
        # a failed read is retried soon: a short job's replica may live only seconds
        waiter.cancel.wait(min(waiter.interval, RETRY_S) if failures else waiter.interval)


def _from_log_analytics(
    cloud: Cloud,
    job: str,
    run: ExecutionRun,
    waiter: Waiter,
    workspace: str | None,
    shown: Counter[tuple[str, str]],
    deliver: Emit,
    say: Callable[[str], None],
    wait_s: float,
) -> None:
    """The lines the stream did not show, from the environment's workspace, once ingestion caught up
    (the same rows `LOGS_SETTLE_POLLS` reads in a row) or after `wait_s`; said before and after."""
    why = (
        "the container ended before its log stream could be attached"
        if not shown
        else "the log stream broke off before the container's end"
    )
    if workspace is None:
        what = "no log line could be read" if not shown else "the log may be incomplete"
        say(
            f"{what}: {why}, and the environment keeps no console lines elsewhere (`acagpu env "
            "create` sends an environment's lines to Log Analytics: run it again to add that)"
        )
        return
    say(
        f"{why}: reading its lines from Log Analytics, where they arrive 20 s to 3 min later "
        f"(waiting up to {wait_s:.0f} s; Ctrl-C stops)"
    )
    poll = min(max(waiter.interval, LOGS_POLL_MIN_S), LOGS_POLL_MAX_S)
    give_up = time.monotonic() + wait_s
    rows: list[tuple[str | None, str, str]] = []
    same, failed, ended = 0, "", False
    while True:
        try:
            # the platform's record of the execution's end is read first: once it is in, the
            # lines printed before it are too, and the read after it is the last one needed
            seen_end = ended or cloud.execution_end_logged(workspace, job, run.execution)
            found = cloud.console_lines(workspace, job, run.execution)
            failed = ""
        except AcaGpuError as exc:
            seen_end, found, failed = ended, rows, exc.message
        same = same + 1 if found and len(found) == len(rows) else 0
        rows, ended = found, seen_end
        settled = bool(rows) and same >= LOGS_SETTLE_POLLS - 1
        if ended or settled or time.monotonic() >= give_up:
            break
        if waiter.cancel.wait(poll):
            break
    left = Counter(shown)
    fresh = 0
    for _, stream, text in rows:
        if left[(stream, text)] > 0:
            left[(stream, text)] -= 1  # the stream showed it already
            continue
        if fresh == 0:
            say("the lines below come from Log Analytics, not the log stream")
        fresh += 1
        deliver(stream, text, LOG_ANALYTICS)
    if not rows and ended:
        say("Log Analytics has the execution's end and no line of the container: it printed none")
    elif not rows:
        said = f": {failed}" if failed else ""
        say(f"Log Analytics had no line of the container within {wait_s:.0f} s{said} (it may print none)")
    else:
        say(f"{fresh} line(s) came from Log Analytics")


def _never_started(run: ExecutionRun, info: ExecutionInfo, shown: Counter[tuple[str, str]]) -> bool:
    """The platform lists the ended execution's replica with no exit code for its container, and no
    look or stream saw it run or print: it never started (an image it could not pull), so it has no
    line anywhere and Log Analytics is not waited for (its refusal is said once, by the run). An
    execution listed without its replicas is not known to be such: its lines are still looked for."""
    return run.running is None and not shown and bool(info.states) and not info.exit_codes


def _seen_running(run: ExecutionRun, at: float | None = None) -> None:
    """The container runs (its log could be opened): it bills from here (or from `at`, when the
    stream knows it started earlier), whether it prints or not."""
    run.running = run.running or (at if at is not None else time.monotonic())


def _cancelled(waiter: Waiter) -> None:
    if waiter.cancel.is_set():
        raise WaitTimedOut("stopped following the container: cancelled", code="Cancelled")


def _job_gone(cloud: Cloud, rg: str, job: str) -> bool:
    """True when the job itself answers 404: someone deleted it (`env delete --force`, `down`), not
    a read that failed; its execution can no longer end or be read."""
    try:
        return cloud.get_job(rg, job) is None
    except AcaGpuError:
        return False


def _execution(cloud: Cloud, rg: str, job: str, execution: str) -> ExecutionInfo | None:
    try:
        return cloud.get_execution(rg, job, execution)
    except AcaGpuError:
        return None
