"""run_exec's session logic: when stdin goes out, when reading stops, reconnect before the command only."""

from __future__ import annotations

from typing import Any

import pytest
import websocket

from aca_gpu.azure import dataplane as dp
from aca_gpu.errors import CloudError

BIN = websocket.ABNF.OPCODE_BINARY
CLOSE = websocket.ABNF.OPCODE_CLOSE


class ScriptedSocket:
    """Answers recv_data from a script; 'drop' raises a closed-connection error."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.sent: list[bytes] = []
        self.closed = False

    def send_binary(self, data: bytes) -> None:
        self.sent.append(data)

    def settimeout(self, value: float) -> None:
        pass

    def recv_data(self) -> tuple[int, bytes]:
        if not self.script:
            raise websocket.WebSocketTimeoutException("idle")
        item = self.script.pop(0)
        if item == "drop":
            raise websocket.WebSocketConnectionClosedException("dropped")
        if callable(item):
            return item(self)  # type: ignore[no-any-return]
        return BIN, item

    def close(self) -> None:
        self.closed = True


def connector(*sockets: ScriptedSocket) -> tuple[Any, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    queue = list(sockets)

    def connect(url: str, **kwargs: Any) -> ScriptedSocket:
        calls.append({"url": url, **kwargs})
        return queue.pop(0)

    return connect, calls


NONCE = "aa11bb22cc33"
SCRIPT = dp.shell_script(["sh", "-c", "exit 3"], NONCE)


def _answer_after_stdin(sock: ScriptedSocket) -> tuple[int, bytes]:
    assert any(frame.startswith(b"\x00\x00") for frame in sock.sent), "output before the command was sent"
    return BIN, f"\x00\x01__ACAGPU_EXIT_{NONCE}__3\r\n".encode()


def test_sends_resize_then_stdin_after_connected_and_drains_after_marker() -> None:
    sock = ScriptedSocket(
        [
            b"\x01Connecting to the container 'c'...",
            b"\x01Successfully connected to container: 'c'.",
            _answer_after_stdin,
            b"\x00\x02late stderr",
        ]
    )
    connect, calls = connector(sock)
    out = dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, verify="/ca.pem", connect=connect)
    assert dp.find_exit_code(out.stdout, NONCE) == 3
    assert sock.sent[0][:2] == b"\x00\x04"
    assert sock.sent[1] == b"\x00\x00" + SCRIPT.encode()
    assert out.stderr == "late stderr"  # frames trailing the marker are still collected
    assert sock.closed
    assert calls[0]["url"] == "wss://h/exec?command=sh"
    assert calls[0]["header"] == ["Authorization: Bearer tok"]
    assert calls[0]["sslopt"]["ca_certs"] == "/ca.pem"


def test_reconnects_once_when_dropped_before_the_command() -> None:
    first = ScriptedSocket(["drop"])
    second = ScriptedSocket([b"\x01Successfully connected to container: 'c'.", _answer_after_stdin])
    connect, calls = connector(first, second)
    out = dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, connect=connect)
    assert len(calls) == 2
    assert dp.find_exit_code(out.stdout, NONCE) == 3


def test_drop_after_the_command_reports_what_arrived() -> None:
    sock = ScriptedSocket([b"\x01Successfully connected to container: 'c'.", b"\x00\x01partial\r\n", "drop"])
    connect, calls = connector(sock)
    out = dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, connect=connect)
    assert len(calls) == 1
    assert out.closed and out.sent
    assert dp.clean_transcript(out.stdout, NONCE) == ("partial\n", None)


def test_two_drops_before_the_command_fail_clearly() -> None:
    connect, _ = connector(ScriptedSocket(["drop"]), ScriptedSocket(["drop"]))
    with pytest.raises(CloudError, match="exec connection"):
        dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, connect=connect)


def test_error_frame_ends_the_session() -> None:
    sock = ScriptedSocket([b'\x02{"Error":{"Code":"ClusterExecFailure","Message":"nope"}}', b"\x00\x01x"])
    connect, _ = connector(sock)
    out = dp.run_exec("wss://h/exec", "tok", command="ls -la", connect=connect)
    assert dp.error_message(out.errors) == "ClusterExecFailure: nope"


def test_single_executable_reads_until_close() -> None:
    sock = ScriptedSocket([b"\x00\x01GPU 0: Tesla T4\r\n", lambda s: (CLOSE, b"")])
    connect, calls = connector(sock)
    out = dp.run_exec("wss://h/exec", "tok", command="nvidia-smi", connect=connect)
    assert out.stdout == "GPU 0: Tesla T4\r\n" and out.closed
    assert calls[0]["url"].endswith("?command=nvidia-smi")
    assert all(not f.startswith(b"\x00\x00") for f in sock.sent)  # no stdin for a single executable


def test_deadline_stops_an_idle_session() -> None:
    ticks = iter(range(0, 1000, 5))
    sock = ScriptedSocket([])
    connect, _ = connector(sock)
    out = dp.run_exec(
        "wss://h/exec",
        "tok",
        stdin=SCRIPT,
        nonce=NONCE,
        timeout=30,
        connect=connect,
        clock=lambda: next(ticks),
    )
    assert out.stdout == "" and out.sent  # stdin went out after the connected-wait, then the deadline hit


class ClosedOnSend(ScriptedSocket):
    """A socket the server closed just after the handshake: the first send raises."""

    def send_binary(self, data: bytes) -> None:
        raise websocket.WebSocketConnectionClosedException("socket is already closed.")


def test_a_socket_closed_under_a_send_is_a_drop_not_a_crash() -> None:
    connect, calls = connector(ClosedOnSend([]), ClosedOnSend([]))
    with pytest.raises(CloudError, match="exec connection"):  # a clear transport error, retried once
        dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, connect=connect)
    assert len(calls) == 2


def test_a_socket_closed_under_a_send_then_a_good_one() -> None:
    good = ScriptedSocket([b"\x01Successfully connected to container: 'c'.", _answer_after_stdin])
    connect, _ = connector(ClosedOnSend([]), good)
    out = dp.run_exec("wss://h/exec", "tok", stdin=SCRIPT, nonce=NONCE, connect=connect, timeout=5)
    assert dp.clean_transcript(out.stdout, NONCE)[1] == 3
