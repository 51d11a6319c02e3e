"""Log-line parsing and the follow loop: reconnect without duplicates, stop rules, deadline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests

from aca_gpu.azure import logstream as ls
from aca_gpu.errors import CloudError, InfraError, WaitTimedOut

# Source: Azure CLI recording test_containerapp_eventstream.yaml (app eventstream, output=json),
# raw body lines verbatim, including the service's \u002B escape.
EVENTSTREAM_LINES = [
    '{"TimeStamp":"2023-06-27T03:58:28Z","Type":"Normal","ContainerAppName":null,"RevisionName":null,'
    '"ReplicaName":null,"Msg":"Connecting to the events collector...","Reason":"StartingGettingEvents",'
    '"EventSource":"ContainerAppController","Count":1}',
    '{"TimeStamp":"2023-06-27 03:58:10 \\u002B0000 UTC","Type":"Normal","ContainerAppName":"capp000002",'
    '"RevisionName":"capp000002--5xyzbqa","ReplicaName":"","Msg":"Updating revision : capp000002--5xyzbqa",'
    '"Reason":"RevisionUpdate","EventSource":"ContainerAppController","Count":4}',
]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"TimeStamp":"2024-01-01T00:00:00Z","Log":"hello world"}', "hello world"),
        ('{"timestamp":"x","log":"lower"}', "lower"),
        ('{"Msg":"from msg"}', "from msg"),
        ('{"message":"from message"}', "from message"),
        ('{"TimeStamp":"t","Log":"2024-01-01T00:00:00.1Z stdout F inner"}', "inner"),
        ('2024-05-01T10:00:00.123456789Z stdout F ACAGPU_RESULT {"ok": true}', 'ACAGPU_RESULT {"ok": true}'),
        ("2024-05-01T10:00:00Z stderr P partial", "partial"),
        ("2024-05-01T10:00:00Z stdout F", ""),
        ("plain text line\r\n", "plain text line"),
        ("{not json", "{not json"),
        ('{"other":"field"}', '{"other":"field"}'),
        # Azure/azure-cli#33487: the CRI flag leads `Log`
        ('{"TimeStamp": "2026-06-03T04:45:59.2214149+00:00", "Log": "F 013c:fixme:file"}', "013c:fixme:file"),
        ('{"TimeStamp": "t", "Log": "P first half"}', "first half"),
        ('{"TimeStamp": "t", "Log": "F"}', ""),
    ],
)
def test_parse_log_line(line: str, message: str) -> None:
    assert ls.parse_log_line(line) == message


def test_parse_event_lines_from_recording() -> None:
    events = [ls.parse_event_line(line) for line in EVENTSTREAM_LINES]
    assert [e["Reason"] for e in events if e] == ["StartingGettingEvents", "RevisionUpdate"]
    assert events[1] is not None and events[1]["TimeStamp"] == "2023-06-27 03:58:10 +0000 UTC"
    assert ls.parse_event_line("   ") is None
    assert ls.parse_event_line("Reconciler error") == {"Msg": "Reconciler error"}


class FakeResponse:
    def __init__(self, status: int, lines: list[str], drop: bool = False, text: str = "") -> None:
        self.status_code = status
        self._lines = lines
        self._drop = drop
        self.text = text
        self.closed = False

    def iter_lines(self, decode_unicode: bool = False) -> Any:
        yield from self._lines
        if self._drop:
            raise requests.ConnectionError("connection reset")

    def close(self) -> None:
        self.closed = True


class Getter:
    def __init__(self, *responses: FakeResponse) -> None:
        self.responses = list(responses)
        self.params: list[dict[str, Any]] = []
        self.tokens: list[str] = []

    def __call__(self, url: str, token: str, params: dict[str, Any], verify: Any, read_timeout: float) -> Any:
        self.params.append(dict(params))
        self.tokens.append(token)
        return self.responses.pop(0)


def followed(
    get: Getter,
    *,
    until: str | None = None,
    tail: int = 5,
    sleep: Callable[[float], None] = lambda s: None,
    **options: Any,
) -> list[str]:
    """The messages `follow_lines` yields, following `get`'s responses: to the one that is `until`
    (the message awaited), else to the stream's end; no pause between connections unless `sleep`."""
    stop_when = None if until is None else lambda m: m == until
    return list(
        ls.follow_lines(
            "u", lambda: "t", follow=True, tail=tail, what=until or "x", get=get, stop_when=stop_when,
            sleep=sleep, **options,
        )
    )  # fmt: skip


def test_follow_reconnects_and_skips_replayed_lines() -> None:
    get = Getter(
        FakeResponse(200, ["t1 stdout F one", "t2 stdout F two"], drop=True),
        FakeResponse(200, ["t1 stdout F one", "t2 stdout F two", "t3 stdout F three", "t4 stdout F DONE"]),
    )
    lines = followed(get, until="DONE", tail=10)
    assert lines == ["one", "two", "three", "DONE"]
    assert get.params[0] == {"follow": "true", "tailLines": 10, "output": "text"}
    assert get.params[1]["tailLines"] == ls.MAX_TAIL  # replay enough to cover the gap


def test_follow_stops_when_replica_is_gone() -> None:
    get = Getter(
        FakeResponse(200, ["a"], drop=True),
        FakeResponse(404, [], text="No replicas found for execution"),
    )
    assert followed(get) == ["a"]


def test_follow_stops_when_finished_after_stream_end() -> None:
    get = Getter(FakeResponse(200, ["a", "b"]))
    assert followed(get, finished=lambda: True) == ["a", "b"]


def test_no_follow_reads_once_and_clamps_tail() -> None:
    get = Getter(FakeResponse(200, ["x"]))
    out = list(ls.follow_lines("u", lambda: "t", follow=False, tail=9999, what="x", get=get))
    assert out == ["x"] and get.params[0]["tailLines"] == 300 and get.params[0]["follow"] == "false"


def test_deadline_raises_when_something_was_awaited() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 40.0
        return now[0]

    get = Getter(*[FakeResponse(200, ["noise"], drop=True) for _ in range(10)])
    with pytest.raises(WaitTimedOut, match="ACAGPU_RESULT"):
        list(
            ls.follow_lines(
                "u",
                lambda: "t",
                follow=True,
                tail=5,
                what="ACAGPU_RESULT",
                get=get,
                stop_when=lambda m: m.startswith("ACAGPU_RESULT"),
                timeout=100,
                clock=clock,
                sleep=lambda s: None,
            )
        )


def test_bad_status_is_a_cloud_error() -> None:
    get = Getter(FakeResponse(401, [], text="Unauthorized"))
    with pytest.raises(CloudError, match="401"):
        list(ls.follow_lines("https://h/logstream", lambda: "t", follow=False, tail=5, what="x", get=get))


def test_read_events_snapshot() -> None:
    get = Getter(FakeResponse(200, EVENTSTREAM_LINES))
    events = ls.read_events("https://h/eventstream", "tok", tail=20, get=get)
    assert [e["Reason"] for e in events] == ["StartingGettingEvents", "RevisionUpdate"]
    assert get.params[0] == {"follow": "false", "tailLines": 20, "output": "json"}


def test_read_events_reads_a_cut_snapshot_again() -> None:
    get = Getter(FakeResponse(200, EVENTSTREAM_LINES[:1], drop=True), FakeResponse(200, EVENTSTREAM_LINES))
    events = ls.read_events("https://h/eventstream", "tok", tail=20, get=get)
    assert [e["Reason"] for e in events] == ["StartingGettingEvents", "RevisionUpdate"]


def test_read_events_cut_every_time_is_infrastructure() -> None:
    get = Getter(*(FakeResponse(200, [], drop=True) for _ in range(ls.SNAPSHOT_ATTEMPTS)))
    with pytest.raises(InfraError, match="cut 3 times"):
        ls.read_events("https://h/eventstream", "tok", tail=20, get=get)


def test_reconnect_is_immediate_after_lines_and_paced_after_nothing() -> None:
    """A delivering stream that drops comes back at once; an empty one waits before retrying."""
    get = Getter(
        FakeResponse(200, ["t1 stdout F one"], drop=True),
        FakeResponse(200, [], drop=True),
        FakeResponse(200, ["t1 stdout F one", "t2 stdout F DONE"]),
    )
    pauses: list[float] = []
    lines = followed(get, until="DONE", tail=10, sleep=pauses.append)
    assert lines == ["one", "DONE"]
    assert pauses == [ls.RECONNECT_PAUSE_S]  # only after the connection that delivered nothing


# Heartbeat as recorded in azure-cli#33487 (json), and its text form.
BEAT_JSON = '{"TimeStamp": "2026-06-03T04:48:25.34888", "Log": "No logs since last 60 seconds"}'
BEAT_TEXT = "2026-06-03T04:48:25.348880000Z No logs since last 60 seconds"


def test_heartbeats_are_recognised_and_a_printed_copy_is_not() -> None:
    assert ls.is_heartbeat(BEAT_JSON) and ls.is_heartbeat(BEAT_TEXT)
    assert ls.is_heartbeat("No logs since last 60 seconds")
    # the same words printed by the container carry a CRI flag: they are output
    assert not ls.is_heartbeat('{"TimeStamp": "t", "Log": "F No logs since last 60 seconds"}')
    assert not ls.is_heartbeat("2026-06-03T04:48:25Z stdout F No logs since last 60 seconds")


def test_follow_drops_heartbeats_and_reconnects_after_a_quiet_close() -> None:
    get = Getter(
        FakeResponse(200, ["t1 stdout F one", BEAT_TEXT, BEAT_TEXT, BEAT_TEXT]),  # closed for quietness
        FakeResponse(200, ["t1 stdout F one", BEAT_TEXT, "t9 stdout F two"]),
    )
    done = iter([False, True])
    out = followed(get, finished=lambda: next(done))
    assert out == ["one", "two"]
    assert len(get.params) == 2


def test_dedup_is_by_timestamp_and_content_with_counts() -> None:
    first = ["t1 stdout F same", "t1 stdout F same", "t2 stdout F same"]
    get = Getter(
        FakeResponse(200, first, drop=True),
        FakeResponse(200, [*first, "t3 stdout F same", "t3 stdout F DONE"]),
    )
    out = followed(get, until="DONE")
    # twice in one instant, then at t2 and t3: four real lines; the replay of the first three is skipped
    assert out == ["same", "same", "same", "same", "DONE"]


def test_partial_records_join_into_the_full_line_and_stay_apart_from_it() -> None:
    lines = [
        '{"TimeStamp": "t1", "Log": "P abc"}',
        '{"TimeStamp": "t1", "Log": "P def"}',
        '{"TimeStamp": "t1", "Log": "F ghi"}',
        '{"TimeStamp": "t1", "Log": "F abc"}',  # same stamp and text as the first partial: another record
    ]
    get = Getter(FakeResponse(200, lines[:2], drop=True), FakeResponse(200, lines))
    done = iter([False, True])
    out = followed(get, output="json", finished=lambda: next(done))
    assert out == ["abcdefghi", "abc"]


def test_a_stream_ending_inside_a_long_line_still_yields_it() -> None:
    get = Getter(FakeResponse(200, ["t1 stdout P half"]))
    assert list(ls.follow_lines("u", lambda: "t", follow=False, tail=5, what="x", get=get)) == ["half"]


def test_a_quiet_close_after_heartbeats_reconnects_at_once() -> None:
    """A job may start printing right after the server closed a quiet stream: no pause then."""
    get = Getter(
        FakeResponse(200, [BEAT_TEXT, BEAT_TEXT, BEAT_TEXT]),
        FakeResponse(200, ["t1 stdout F out", "t2 stderr F err"]),
    )
    done = iter([False, True])
    pauses: list[float] = []
    records = list(
        ls.follow_records(
            "u", lambda: "t", follow=True, tail=5, what="x", get=get, finished=lambda: next(done),
            sleep=pauses.append,
        )
    )  # fmt: skip
    assert records == [("t1", "stdout", "out"), ("t2", "stderr", "err")]
    assert pauses == []


# Seen in ACA console streams (text and json): two lines of the service's own open every connection,
# without a CRI flag and stamped when the stream connects, so after the container's older lines.
NOTICES_TEXT = [
    "2025-12-09T14:04:33.45953  Connecting to the container 'checkout'...",
    "2025-12-09T14:04:33.53740  Successfully Connected to container: 'checkout' "
    "[Revision: 'ca-checkout--azd-1010101010', Replica: 'ca-checkout--azd-1010101010-e3fh4ij5kl-6mn7o']",
]
NOTICE_JSON = (
    '{"TimeStamp": "2026-09-19T07:31:35.65006", "Log": "Successfully Connected to container: '
    "'api' [Revision: 'api--0000001', Replica: 'api--0000001-774dfcfd85-72cj9']\"}"
)


def test_a_streams_opening_notices_are_the_services_not_the_containers() -> None:
    for line in [*NOTICES_TEXT, NOTICE_JSON]:
        record = ls.parse_record(line)
        assert record.notice and not record.heartbeat and record.flag is None, line
    assert ls.parse_record(NOTICES_TEXT[0]).message == "Connecting to the container 'checkout'..."
    # the container printing the same words is output (it carries a CRI flag)
    assert not ls.is_notice("2025-12-09T14:04:33.1Z stdout F Connecting to the container 'checkout'...")
    assert not ls.is_notice('{"TimeStamp": "t", "Log": "F Connecting to the container \'x\'..."}')


def test_notices_on_every_connection_are_neither_shown_nor_glued_to_a_long_line() -> None:
    first = [*NOTICES_TEXT, "2025-12-09T14:04:24.1Z stdout P abc", "2025-12-09T14:04:24.1Z stdout P def"]
    replay = [
        "2025-12-09T14:05:40.11111  Connecting to the container 'checkout'...",  # newer stamps this time
        "2025-12-09T14:05:40.22222  Successfully Connected to container: 'checkout' "
        "[Revision: 'r', Replica: 'x']",
        *first[2:],
        "2025-12-09T14:04:24.1Z stdout F ghi",
        "2025-12-09T14:04:25.2Z stdout F after",
    ]
    get = Getter(FakeResponse(200, first, drop=True), FakeResponse(200, replay))
    assert followed(get, until="after") == ["abcdefghi", "after"]


def test_strict_says_when_a_dropped_stream_could_not_be_read_again() -> None:
    """A cut stream whose replica then ended: the lines that came through, then LogStreamLost."""
    get = Getter(FakeResponse(200, ["t1 stdout F one", "t2 stdout F two"], drop=True))
    got: list[tuple[str | None, str, str]] = []
    with pytest.raises(InfraError) as caught:
        for record in ls.follow_records(
            "u", lambda: "t", follow=True, tail=5, what="x", get=get, finished=lambda: True,
            sleep=lambda s: None, strict=True,
        ):  # fmt: skip
            got.append(record)
    assert got == [("t1", "stdout", "one"), ("t2", "stdout", "two")]
    assert caught.value.code == "LogStreamLost"
    # not strict (the tester, logs): the same stream simply ends
    quiet = Getter(FakeResponse(200, ["t1 stdout F one"], drop=True))
    assert list(ls.follow_lines("u", lambda: "t", follow=True, tail=5, what="x", get=quiet,
                                finished=lambda: True, sleep=lambda s: None)) == ["one"]  # fmt: skip


def test_a_stream_accepted_after_waiting_says_the_container_started_between_the_two_asks() -> None:
    """The start of a container is when it bills from. A stream answered "waiting to start" and
    accepted at the next ask (every NOT_READY_RETRY_S) saw the start between the two: their middle,
    not the acceptance, which is half a retry late on average (every probe and tester read under
    the bill by that much)."""
    now = [100.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    get = Getter(
        FakeResponse(400, [], text='container "c" in replica "r" is waiting to start: PullingImage'),
        FakeResponse(200, ["t1 stdout F one"]),
    )
    started: list[float | None] = []
    lines = list(
        ls.follow_records(
            "u", lambda: "t", follow=False, tail=5, what="x", get=get, clock=lambda: now[0], sleep=sleep,
            finished=lambda: False, on_connected=lambda at=None: started.append(at),
        )
    )  # fmt: skip
    assert [m for _, _, m in lines] == ["one"]
    assert pauses == [ls.NOT_READY_RETRY_S]
    assert started == [pytest.approx(100.0 + ls.NOT_READY_RETRY_S / 2)]


def test_a_stream_accepted_at_once_is_connected_now() -> None:
    get = Getter(FakeResponse(200, ["t1 stdout F one"]))
    started: list[float | None] = []
    list(
        ls.follow_records(
            "u", lambda: "t", follow=False, tail=5, what="x", get=get, sleep=lambda s: None,
            on_connected=lambda at=None: started.append(at),
        )
    )  # fmt: skip
    assert started == [None]  # the caller takes its own now: nothing says the container started earlier


@pytest.mark.parametrize("ask_s", [0.001, 0.1, 1.5])
def test_the_execution_is_read_after_as_many_asks_however_long_each_ask_takes(ask_s: float) -> None:
    """While a container has not started, the stream is asked every NOT_READY_RETRY_S and ARM is read
    now and then for whether the execution ended. Counted in asks, not seconds: the requests a run
    sends then do not depend on how busy the machine is, so a recording replays (its answers come
    per resource in the recorded order; a busy replay that read the execution more often met its
    recorded `Succeeded` before the stream's own answers said the container had run)."""
    now = [0.0]

    def clock() -> float:
        now[0] += ask_s / 4  # every look at the clock costs time: a slow machine
        return now[0]

    waiting = FakeResponse(400, [], text='container "c" in replica "r" is waiting to start: PullingImage')
    asks = 2 * ls.FINISHED_CHECK_EVERY + 3
    get = Getter(*[waiting] * asks, FakeResponse(200, ["t1 stdout F one"]))
    checks: list[int] = []

    def finished() -> bool:
        checks.append(len(get.params))  # the asks made so far
        return False

    lines = list(
        ls.follow_records(
            "u", lambda: "t", follow=False, tail=5, what="x", get=get, clock=clock, sleep=lambda s: None,
            finished=finished, timeout=1e9,
        )
    )  # fmt: skip
    assert [m for _, _, m in lines] == ["one"]
    every = ls.FINISHED_CHECK_EVERY
    assert checks == [1, 1 + every, 1 + 2 * every]
