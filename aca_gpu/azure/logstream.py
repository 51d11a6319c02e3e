"""Console log streams and system event streams over HTTPS (as the Azure CLI's containerapp code reads them).

`GET <logStreamEndpoint>?follow=&tailLines=&output=json|text` with `Authorization: Bearer <ACA token>`
returns one line per log record: JSON `{"TimeStamp": ..., "Log": "F <message>"}` (the CRI flag leads
`Log`: `F` full, `P` partial) or CRI text `<timestamp> stdout F <message>`; other JSON field names and
plain text are accepted too. What a follower must cope with, as ACA sends it:
- a heartbeat `No logs since last 60 seconds` (no CRI flag) every quiet minute: dropped;
- two opening lines on every connection, `Connecting to the container 'c'...` and `Successfully
  Connected to container: 'c' [Revision: 'r', Replica: 'x']` (a job's: `[Execution: 'e', Replica:
  'x']`, as recorded) (no CRI flag, stamped at the connection,
  so later than the container's lines after them): dropped, and never joined to a long line;
- a followed stream closed by the server after about three quiet minutes (and drops at any time):
  reconnected, with tailLines, until the caller's stop rule, `finished`, or deadline;
- the overlap a reconnect replays: skipped by timestamp plus content, counted, so identical lines
  with different timestamps, or printed twice in the same instant, all come through once each;
- lines over the runtime's 16 KiB limit arrive as `P` fragments and a final `F`: joined into one.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from aca_gpu.errors import CloudError, InfraError, WaitTimedOut

MESSAGE_KEYS = ("Log", "log", "Msg", "msg", "message", "Message")
STAMP_KEYS = ("TimeStamp", "timeStamp", "timestamp", "Timestamp", "time")
CRI_RE = re.compile(r"^(?P<ts>\S+)\s+(?P<stream>stdout|stderr)\s+(?P<tag>[FP])(?: (?P<msg>.*))?$")
FLAG_RE = re.compile(r"^(?P<tag>[FP])(?: (?P<msg>.*))?$", re.DOTALL)
HEARTBEAT_RE = re.compile(r"^(?:(?P<ts>\S+)\s+)?No logs since last \d+ seconds$")
# The two lines each connection opens with: the service's, not the container's (no CRI flag)
NOTICE_RE = re.compile(
    r"^(?:(?P<ts>\S+)\s+)?(?P<msg>Connecting to the container '[^']*'\.\.\."
    r"|Successfully Connected to container: '[^']*' \[(?:Revision|Execution): .*\])$"
)
MAX_TAIL = 300  # the service validates tailLines to 0-300
READ_SLICE_S = 30.0
RECONNECT_PAUSE_S = 1.0
GONE_TEXT = ("no replicas found", "replica not found", "not found")
SEEN_WINDOW = 5000  # records remembered for de-duplicating a reconnect's replay


@dataclass(frozen=True)
class LogRecord:
    """One parsed stream line: its timestamp, CRI flag (`F`, `P`, or None when it has none), message."""

    stamp: str | None
    flag: str | None
    message: str
    heartbeat: bool = False
    stream: str = "stdout"  # the CRI text form names it; the JSON form does not (stdout then)
    notice: bool = False  # "Connecting to the container ..." / "Successfully Connected ...": the service's

    @property
    def key(self) -> Hashable:
        """What identifies a record across reconnects: timestamp, stream, flag and content."""
        return (self.stamp, self.stream, self.flag, self.message)


def parse_record(line: str) -> LogRecord:
    """One log-stream line (JSON object, CRI-prefixed text, heartbeat, or plain text)."""
    text = line.rstrip("\r\n")
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError:
            return LogRecord(None, None, text)
        if isinstance(doc, dict):
            stamp = next((str(doc[k]) for k in STAMP_KEYS if isinstance(doc.get(k), str)), None)
            for key in MESSAGE_KEYS:
                value = doc.get(key)
                if not isinstance(value, str):
                    continue
                value = value.rstrip("\r\n")
                if CRI_RE.match(value):
                    inner = parse_record(value)
                    return LogRecord(stamp or inner.stamp, inner.flag, inner.message, stream=inner.stream)
                flagged = FLAG_RE.match(value)
                if flagged:
                    return LogRecord(stamp, flagged.group("tag"), flagged.group("msg") or "")
                unflagged = value.strip()
                heartbeat, notice = bool(HEARTBEAT_RE.match(unflagged)), bool(NOTICE_RE.match(unflagged))
                return LogRecord(stamp, None, value, heartbeat=heartbeat, notice=notice)
        return LogRecord(None, None, text)
    match = CRI_RE.match(text)
    if match:
        return LogRecord(
            match.group("ts"), match.group("tag"), match.group("msg") or "", stream=match.group("stream")
        )
    beat = HEARTBEAT_RE.match(stripped)
    if beat:
        return LogRecord(beat.group("ts"), None, stripped, heartbeat=True)
    opening = NOTICE_RE.match(stripped)
    if opening:
        return LogRecord(opening.group("ts"), None, opening.group("msg"), notice=True)
    return LogRecord(None, None, text)


def parse_log_line(line: str) -> str:
    """The message of one log-stream line (JSON object, CRI-prefixed text, or plain text)."""
    return parse_record(line).message


def is_heartbeat(line: str) -> bool:
    """The server's keep-alive line, not something the container printed."""
    return parse_record(line).heartbeat


def is_notice(line: str) -> bool:
    """One of the two lines a console stream opens with: the service's, not the container's."""
    return parse_record(line).notice


def parse_event_line(line: str) -> dict[str, Any] | None:
    """One system event (`{"TimeStamp","Type","Reason","Msg",...}`); None for blank lines."""
    stripped = line.strip()
    if not stripped:
        return None
    try:
        doc = json.loads(stripped)
    except ValueError:
        return {"Msg": stripped}
    return doc if isinstance(doc, dict) else {"Msg": stripped}


class _Seen:
    """How many times each recent record was delivered, to skip what a reconnect replays.

    A record counts as replayed while a connection has shown it no more often than it was delivered;
    a record without a timestamp is keyed by its raw line. The window keeps memory bounded.
    """

    def __init__(self, size: int = SEEN_WINDOW) -> None:
        self._counts: Counter[Hashable] = Counter()
        self._order: deque[Hashable] = deque()
        self._size = size

    def add(self, key: Hashable) -> None:
        self._counts[key] += 1
        self._order.append(key)
        while len(self._order) > self._size:
            old = self._order.popleft()
            self._counts[old] -= 1
            if self._counts[old] <= 0:
                del self._counts[old]

    def count(self, key: Hashable) -> int:
        return self._counts.get(key, 0)

    def __len__(self) -> int:
        return len(self._order)


class StreamGone(Exception):
    """The stream's replica no longer exists (finished job execution, replaced replica)."""


class StreamNotReady(Exception):
    """The replica exists but its container has not started (pulling, creating): try again soon."""


NOT_READY_TEXT = ("waiting to start", "containercreating", "podinitializing", "pullingimage")
# called when a connection is accepted: with the moment the container started when a "waiting to
# start" came first (the middle of that answer and the accepted ask), else with nothing (now)
Connected = Callable[..., None]
NOT_READY_RETRY_S = 0.1  # a container that prints and exits at once may run for only a moment
# asks of a not-started container's stream between ARM reads of whether its execution ended (about
# 1 s on an idle machine). Counted, not timed: what a run asks then does not depend on how busy the
# machine is, so `emulator replay` (each resource's answers in the recorded order) can follow it.
FINISHED_CHECK_EVERY = 10


def _get(url: str, token: str, params: dict[str, Any], verify: str | bool, read_timeout: float) -> Any:
    import requests

    from aca_gpu.azure.clients import recording_on

    response = requests.get(
        url,
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        stream=True,
        verify=verify,
        timeout=(20.0, read_timeout),
    )
    if not recording_on():  # the recorder (and its sanitizer) loads only with `--record`
        return response
    from aca_gpu.azure import recorder

    return recorder.stream(response, "GET", str(response.url))


Getter = Callable[[str, str, dict[str, Any], "str | bool", float], Any]
SNAPSHOT_ATTEMPTS = 3


def open_lines(
    url: str,
    token: str,
    *,
    follow: bool,
    tail: int,
    output: str = "text",
    verify: str | bool = True,
    read_timeout: float = READ_SLICE_S,
    get: Getter = _get,
) -> Iterator[str]:
    """Raw lines of one stream connection; raises StreamGone on 404 / 'No replicas found'."""
    params = {"follow": str(follow).lower(), "tailLines": max(0, min(MAX_TAIL, tail)), "output": output}
    response = get(url, token, params, verify, read_timeout)
    try:
        if response.status_code != 200:
            body = (response.text or "")[:300]
            if response.status_code in (404, 410) or any(t in body.lower() for t in GONE_TEXT[:2]):
                raise StreamGone(f"{response.status_code}: {body}")
            if response.status_code == 400 and any(t in body.lower() for t in NOT_READY_TEXT):
                raise StreamNotReady(body)
            raise CloudError(
                f"log stream {url.split('?')[0]} answered {response.status_code}: {' '.join(body.split())}",
                code=f"LogStream{response.status_code}",
            )
        for raw in response.iter_lines(decode_unicode=True):
            if raw is None:
                continue
            line = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
            if line.strip():
                yield line
    finally:
        response.close()


def follow_lines(
    url: str,
    token: Callable[[], str],
    *,
    follow: bool,
    tail: int,
    what: str,
    output: str = "text",
    verify: str | bool = True,
    stop_when: Callable[[str], bool] | None = None,
    finished: Callable[[], bool] | None = None,
    timeout: float = 600.0,
    get: Getter = _get,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_connected: Connected | None = None,
) -> Iterator[str]:
    """Messages from a log stream, reconnecting on drops until stop_when, end of replica, or deadline.

    `token` is called per connection (tokens last an hour). At the deadline this raises WaitTimedOut
    when something was awaited (`stop_when`), and simply ends otherwise.
    """
    for _, _, message in follow_records(
        url,
        token,
        follow=follow,
        tail=tail,
        what=what,
        output=output,
        verify=verify,
        stop_when=stop_when,
        finished=finished,
        timeout=timeout,
        get=get,
        clock=clock,
        sleep=sleep,
        on_connected=on_connected,
    ):
        yield message


def follow_records(
    url: str,
    token: Callable[[], str],
    *,
    follow: bool,
    tail: int,
    what: str,
    output: str = "text",
    verify: str | bool = True,
    stop_when: Callable[[str], bool] | None = None,
    finished: Callable[[], bool] | None = None,
    timeout: float = 600.0,
    get: Getter = _get,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    strict: bool = False,
    on_connected: Connected | None = None,
    on_closed: Callable[[], None] | None = None,
) -> Iterator[tuple[str | None, str, str]]:
    """(timestamp, stream, message) of each line, with `follow_lines`' reconnects and de-duplication.

    A container that has not started yet (the stream answers "waiting to start") is tried again
    every NOT_READY_RETRY_S until it runs or `finished`: a follower may attach as soon as the
    replica is listed. `on_connected` is called at each connection the server accepted (after a
    "waiting to start", with the middle of that answer and the accepted ask: when the container
    started, to half a retry, where the accepting call's own time would be up to a retry late),
    `on_closed`
    at each one the server ended by itself without heartbeats (its container had exited).
    `strict`: a stream that was never attached, or whose last connection dropped and could not be
    read again (the replica ended, or went), raises InfraError(LogStreamLost) at the end instead of
    ending quietly, so the caller can read the lines elsewhere or say the output may be incomplete."""
    import requests

    deadline = clock() + timeout
    seen = _Seen()
    dropped = False  # the last connection broke off rather than ending
    attached = False  # a connection was accepted: the container's log was there to read
    refused_at: float | None = None  # the last "waiting to start" answer: the container ran after it
    partial: list[str] = []  # P fragments waiting for their F line (kept across reconnects)
    first = True
    refusals = 0  # "waiting to start" answers so far: `finished` reads ARM, not at every quick retry
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            break
        delivered = alive = beat = False  # new lines came; the server sent anything; a heartbeat
        shown: Counter[Hashable] = Counter()  # this connection's records, against `seen`
        asked = clock()
        try:
            lines = open_lines(
                url,
                token(),
                follow=follow,
                tail=tail if first else MAX_TAIL,
                output=output,
                verify=verify,
                read_timeout=max(1.0, min(READ_SLICE_S, remaining)),
                get=get,
            )
            for line in lines:
                if not attached:
                    attached = True
                    if on_connected is not None and refused_at is not None:
                        on_connected((refused_at + asked) / 2)
                    elif on_connected is not None:
                        on_connected()
                record = parse_record(line)
                alive = True  # replayed lines too: the replica is there, come back at once if cut
                if record.heartbeat:
                    beat = True
                    if clock() >= deadline:
                        break
                    continue
                if record.notice:
                    # the service's opening lines: not output, never glued to a long line's fragments,
                    # and (stamped anew on each connection) nothing a reconnect's replay could match
                    continue
                key = record.key if record.stamp is not None else ("raw", line)
                shown[key] += 1
                if shown[key] <= seen.count(key):
                    continue  # replayed after a reconnect: already delivered
                seen.add(key)
                if record.flag == "P":
                    partial.append(record.message)
                    continue
                message = "".join(partial) + record.message
                partial.clear()
                delivered = True
                yield record.stamp, record.stream, message
                if stop_when is not None and stop_when(message):
                    return
                if clock() >= deadline:
                    break
            else:
                if attached and not beat and on_closed is not None:
                    on_closed()
            dropped = False
        except (StreamNotReady, StreamGone) as exc:
            # before the first attach, a replica that is not there yet (or no longer) is asked again
            # until the execution has ended; once attached, a gone replica is the end
            if isinstance(exc, StreamGone) and (attached or finished is None):
                break
            if finished is None:  # nobody to ask whether waiting is worth it
                raise CloudError(f"log stream {url.split('?')[0]}: {exc}", code="LogStream400") from None
            refusals += 1
            if (refusals - 1) % FINISHED_CHECK_EVERY == 0 and finished():  # the first, then every 10th
                break
            refused_at = clock() if isinstance(exc, StreamNotReady) else refused_at
            sleep(min(NOT_READY_RETRY_S, max(0.0, deadline - clock())))
            continue  # not a connection: the next one still asks for the whole tail
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
            dropped = True  # dropped, idle, or closed for quietness: reconnect below unless finished
        first = False
        if not follow:
            break
        if finished is not None and finished():
            break
        # A stream cut while it was open, that delivered new lines, or that the server closed for
        # quietness after heartbeats comes back at once (a short job's replica may print and go
        # within seconds); one the server ended with nothing new and no heartbeat (a finished
        # container whose replica lingers) or that gave nothing at all waits before the next try:
        # its replay covers the pause, and a lingering replica is not read again and again.
        if not delivered and not (dropped and alive) and not beat:
            sleep(min(RECONNECT_PAUSE_S, max(0.0, deadline - clock())))
    if partial:  # the stream ended inside a long line: what arrived of it is still output
        message = "".join(partial)
        partial.clear()
        yield None, "stdout", message
        if stop_when is not None and stop_when(message):
            return
    if stop_when is not None and clock() >= deadline:
        raise WaitTimedOut(f"timed out after {timeout:.0f}s waiting for {what}", code="LogWaitTimeout")
    if strict and not attached:
        raise InfraError(
            f"the log stream of {what} could not be attached before its replica ended",
            code="LogStreamLost",
        )
    if strict and dropped:
        raise InfraError(
            f"the log stream of {what} broke off and its replica ended before it could be read again",
            code="LogStreamLost",
        )


def read_events(
    url: str,
    token: str,
    *,
    tail: int,
    verify: str | bool = True,
    get: Getter = _get,
) -> list[dict[str, Any]]:
    """A snapshot of the system event stream (follow=false, json); a cut stream is read again."""
    import requests

    for attempt in range(1, SNAPSHOT_ATTEMPTS + 1):
        events: list[dict[str, Any]] = []
        try:
            for line in open_lines(
                url, token, follow=False, tail=tail, output="json", verify=verify, get=get
            ):
                event = parse_event_line(line)
                if event is not None:
                    events.append(event)
        except StreamGone:
            return events
        except requests.RequestException as exc:
            if attempt == SNAPSHOT_ATTEMPTS:
                raise InfraError(
                    f"the event stream {url.split('?')[0]} was cut {SNAPSHOT_ATTEMPTS} times "
                    f"({type(exc).__name__})",
                    code="EventStreamCut",
                ) from exc
            continue
        return events
    return []
