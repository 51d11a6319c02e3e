"""Console log streams and system event streams over HTTPS (aca-api.md §3.5-3.7).

`GET <logStreamEndpoint>?follow=&tailLines=&output=json|text` with `Authorization: Bearer <ACA token>`
returns one line per log line. JSON field names are UNCONFIRMED (`Log`, `log`, `Msg`, `message`), and
text lines may carry a CRI prefix (`<timestamp> stdout F <message>`): `parse_log_line` accepts all.
Streams drop (a third party saw `--follow` end after ~17 s), so following reconnects with tailLines
and skips the lines it already yielded.
"""

from __future__ import annotations

import json
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from aca_gpu.errors import CloudError, WaitTimedOut

MESSAGE_KEYS = ("Log", "log", "Msg", "msg", "message", "Message")
CRI_RE = re.compile(r"^(?P<ts>\S+)\s+(?P<stream>stdout|stderr)\s+(?P<tag>[FP])(?: (?P<msg>.*))?$")
MAX_TAIL = 300  # the service validates tailLines to 0-300
READ_SLICE_S = 30.0
RECONNECT_PAUSE_S = 1.0
GONE_TEXT = ("no replicas found", "replica not found", "not found")


def parse_log_line(line: str) -> str:
    """The message of one log-stream line (JSON object, CRI-prefixed text, or plain text)."""
    text = line.rstrip("\r\n")
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError:
            return text
        if isinstance(doc, dict):
            for key in MESSAGE_KEYS:
                value = doc.get(key)
                if isinstance(value, str):
                    return parse_log_line(value) if CRI_RE.match(value) else value.rstrip("\r\n")
        return text
    match = CRI_RE.match(text)
    if match:
        return match.group("msg") or ""
    return text


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
    """The most recent raw lines, to skip the overlap a reconnect with tailLines replays."""

    def __init__(self, size: int = 2000) -> None:
        self._lines: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def add(self, line: str) -> None:
        self._lines[line] = None
        self._lines.move_to_end(line)
        while len(self._lines) > self._size:
            self._lines.popitem(last=False)

    def __contains__(self, line: object) -> bool:
        return line in self._lines

    def __len__(self) -> int:
        return len(self._lines)


class StreamGone(Exception):
    """The stream's replica no longer exists (finished job execution, replaced replica)."""


def _get(url: str, token: str, params: dict[str, Any], verify: str | bool, read_timeout: float) -> Any:
    import requests

    return requests.get(
        url,
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        stream=True,
        verify=verify,
        timeout=(20.0, read_timeout),
    )


Getter = Callable[[str, str, dict[str, Any], "str | bool", float], Any]


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
) -> Iterator[str]:
    """Messages from a log stream, reconnecting on drops until stop_when, end of replica, or deadline.

    `token` is called per connection (tokens last an hour). At the deadline this raises WaitTimedOut
    when something was awaited (`stop_when`), and simply ends otherwise.
    """
    import requests

    deadline = clock() + timeout
    seen = _Seen()
    first = True
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            break
        replaying = not first
        delivered = False
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
                if replaying and line in seen:
                    continue
                replaying = False
                delivered = True
                seen.add(line)
                message = parse_log_line(line)
                yield message
                if stop_when is not None and stop_when(message):
                    return
                if clock() >= deadline:
                    break
        except StreamGone:
            return
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError):
            pass  # dropped or idle: reconnect below unless finished
        first = False
        if not follow:
            return
        if finished is not None and finished():
            return
        # A stream that was delivering and dropped comes back at once (a finished job's replica may
        # linger only seconds); one that gave nothing waits before the next try.
        if not delivered:
            sleep(min(RECONNECT_PAUSE_S, max(0.0, deadline - clock())))
    if stop_when is not None:
        raise WaitTimedOut(f"timed out after {timeout:.0f}s waiting for {what}", code="LogWaitTimeout")


def read_events(
    url: str,
    token: str,
    *,
    tail: int,
    verify: str | bool = True,
    get: Getter = _get,
) -> list[dict[str, Any]]:
    """A snapshot of the system event stream (follow=false, json)."""
    events: list[dict[str, Any]] = []
    try:
        for line in open_lines(url, token, follow=False, tail=tail, output="json", verify=verify, get=get):
            event = parse_event_line(line)
            if event is not None:
                events.append(event)
    except StreamGone:
        return events
    return events
