"""Exec into a replica over the ACA data-plane websocket (as `az containerapp exec`
speaks it: azure-cli's containerapp `_ssh_utils.py`).

Wire format, all binary frames. Server → client: byte 0 is the proxy status (0 forward, 1 info,
2 error); on forward frames byte 1 is the channel (1 stdout, 2 stderr) and the payload starts at
byte 2. Client → server: `00 00` + stdin bytes, `00 04` + `{"Width": w, "Height": h}` to resize.

The service runs `command` as ONE executable and reports no exit code, so commands with arguments
go through `sh` on stdin, followed by an echo of a unique marker that carries `$?`. The codec and
transcript parsing below are pure so they are tested on byte sequences; `run_exec` is the I/O.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus, urlsplit

from aca_gpu.errors import CloudError

STATUS_FORWARD = 0
STATUS_INFO = 1
STATUS_ERROR = 2
CHANNEL_STDIN = 0
CHANNEL_STDOUT = 1
CHANNEL_STDERR = 2
CHANNEL_RESIZE = 4
MARKER_PREFIX = "__ACAGPU_EXIT_"
# wide enough that a TTY never wraps the echoed command line (wrapping would hide the echo)
TERMINAL_SIZE = (500, 50)
CONNECTED_WAIT_S = 10.0
RECV_SLICE_S = 1.0
DRAIN_S = 0.5


@dataclass(frozen=True)
class Frame:
    """One decoded server frame. `kind` is stdout, stderr, info, error, or other (unknown channel)."""

    kind: str
    text: str
    status: int
    channel: int | None = None


def encode_stdin(data: str | bytes) -> bytes:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    return bytes([STATUS_FORWARD, CHANNEL_STDIN]) + payload


def encode_resize(width: int, height: int) -> bytes:
    body = json.dumps({"Width": width, "Height": height}, separators=(",", ":"))
    return bytes([STATUS_FORWARD, CHANNEL_RESIZE]) + body.encode("utf-8")


def _text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload.decode("latin-1")


def decode_frame(data: bytes | str) -> Frame:
    if isinstance(data, str):  # a text frame: not part of the protocol, keep it visible as info
        return Frame("info", data, STATUS_INFO)
    if not data:
        return Frame("other", "", -1)
    status = data[0]
    if status == STATUS_FORWARD:
        if len(data) < 2:
            return Frame("other", "", status)
        channel = data[1]
        kind = {CHANNEL_STDOUT: "stdout", CHANNEL_STDERR: "stderr"}.get(channel, "other")
        return Frame(kind, _text(data[2:]), status, channel)
    if status == STATUS_INFO:
        return Frame("info", _text(data[1:]), status)
    if status == STATUS_ERROR:
        return Frame("error", _text(data[1:]), status)
    return Frame("other", _text(data[1:]), status)


def new_nonce() -> str:
    return secrets.token_hex(6)


def marker_echo(nonce: str) -> str:
    return f'echo "{MARKER_PREFIX}{nonce}__$?"'


def command_line(argv: Sequence[str], nonce: str) -> str:
    """The line written to the shell: the quoted command, then the marker echo carrying `$?`."""
    return f"{shlex.join(argv)}; {marker_echo(nonce)}"


STDIN_MAX = 1024 * 1024  # local input forwarded to a remote command (the argv limits bound it)
STDIN_ARG = 96 * 1024  # base64 per argument: under Linux's 128 KiB limit on one argument
STDIN_FRAME = 32 * 1024  # the session's stdin goes out in frames of at most this many bytes

# `sh -c` with: the number of command words, the command, then the data as base64 arguments.
# The left of the pipe drops the command words and prints the data; the right keeps only them.
_STDIN_SCRIPT = """n=$1; shift
{ i=0; while [ "$i" -lt "$n" ]; do shift; i=$((i+1)); done; for c; do printf '%s\\n' "$c"; done; } \\
| base64 -d | { t=$#; i=0; while [ "$i" -lt "$t" ]; do
  if [ "$i" -lt "$n" ]; then set -- "$@" "$1"; fi; shift; i=$((i+1)); done; exec "$@"; }"""


def with_stdin(argv: Sequence[str], data: bytes | None) -> list[str]:
    """argv wrapped so the remote command reads `data` and then end-of-input (nothing: /dev/null).

    The session's own stdin carries the shell script, and on ACA it is a TTY whose line discipline
    would mangle binary data and cap line length; so the data travels base64-encoded, in
    76-character lines, as arguments of a small `sh -c` script that decodes it (`base64 -d`:
    coreutils, busybox) into the command's stdin. The command's exit status is the pipeline's.
    """
    if not data:
        return ["sh", "-c", 'exec "$0" "$@" </dev/null', *argv]
    encoded = base64.encodebytes(data).decode("ascii")
    chunks = [encoded[i : i + STDIN_ARG].rstrip("\n") for i in range(0, len(encoded), STDIN_ARG)]
    return ["sh", "-c", _STDIN_SCRIPT, "sh", str(len(argv)), *argv, *chunks]


def shell_script(argv: Sequence[str], nonce: str) -> str:
    return f"{command_line(argv, nonce)}\nexit\n"


def marker_regex(nonce: str) -> re.Pattern[str]:
    # digits only: the echoed command line shows `$?` where the real result shows the number
    return re.compile(re.escape(f"{MARKER_PREFIX}{nonce}__") + r"(\d+)")


def find_exit_code(stdout: str, nonce: str) -> int | None:
    match = marker_regex(nonce).search(stdout)
    return int(match.group(1)) if match else None


def clean_transcript(stdout: str, nonce: str) -> tuple[str, int | None]:
    """(command output, exit code) from a shell session's stdout.

    Handles a TTY-like session (input echoed, CRLF, prompts) and a plain one: drops everything up to
    and including the echoed command line, and the marker line and anything after it.
    """
    text = stdout.replace("\r\n", "\n").replace("\r", "")
    match = marker_regex(nonce).search(text)
    code = int(match.group(1)) if match else None
    body = text[: match.start()] if match else text
    echoed = f"{MARKER_PREFIX}{nonce}__$?"
    if echoed in body:
        cut = body.rfind(echoed)
        newline = body.find("\n", cut)
        body = "" if newline < 0 else body[newline + 1 :]
        # a TTY echoes the queued `exit` line as soon as it is typed, often before the output
        first, sep, rest = body.partition("\n")
        if sep and first.strip() in {"exit", "# exit", "$ exit"}:
            body = rest
    return body, code


def clean_stderr(stderr: str) -> str:
    return stderr.replace("\r\n", "\n").replace("\r", "")


@dataclass
class Transcript:
    """What one exec session produced, before interpretation."""

    stdout: str = ""
    stderr: str = ""
    infos: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    closed: bool = False  # the server closed the socket (or it dropped)
    sent: bool = False  # stdin was delivered


def exec_url(endpoint: str, command: str) -> str:
    sep = "&" if "?" in endpoint else "?"
    return f"{endpoint}{sep}command={quote_plus(command)}"


def error_message(errors: Sequence[str]) -> str:
    """A one-line message from proxy ERROR frames (`{"Error": {"Code": "ClusterExecFailure", ...}}`)."""
    parts = []
    for raw in errors:
        try:
            body = json.loads(raw)
        except ValueError:
            parts.append(raw.strip())
            continue
        err = body.get("Error") or body.get("error") or body if isinstance(body, dict) else body
        if isinstance(err, dict):
            code = err.get("Code") or err.get("code")
            msg = err.get("Message") or err.get("message") or ""
            parts.append(f"{code}: {msg}" if code else str(msg))
        else:
            parts.append(str(err))
    return " ".join(" ".join(parts).split())[:500]


Connect = Callable[..., Any]


def _default_connect(url: str, **kwargs: Any) -> Any:
    import websocket

    from aca_gpu.azure.clients import recording_on

    ws = websocket.create_connection(url, **kwargs)
    if not recording_on():  # the recorder (and its sanitizer) loads only with `--record`
        return ws
    from aca_gpu.azure import recorder

    return recorder.socket(ws, url)


def run_exec(
    endpoint: str,
    token: str,
    *,
    command: str = "sh",
    stdin: str | None = None,
    nonce: str | None = None,
    verify: str | bool = True,
    timeout: float = 120.0,
    connect: Connect = _default_connect,
    clock: Callable[[], float] = time.monotonic,
) -> Transcript:
    """Open the exec socket, deliver stdin once, collect frames until the marker, close, or deadline.

    A socket that drops before stdin was sent is reconnected once; after that what was received is
    reported as is (the caller turns a missing marker into exit_code=None).
    """
    deadline = clock() + timeout
    transcript = Transcript()
    for attempt in (1, 2):
        try:
            _session(endpoint, token, command, stdin, nonce, verify, deadline, connect, clock, transcript)
            return transcript
        except _Dropped as dropped:
            if transcript.sent or attempt == 2 or clock() >= deadline:
                transcript.closed = True
                if not transcript.sent and not transcript.stdout:
                    raise CloudError(
                        f"exec connection to {endpoint} failed: {dropped}", code="ExecDropped"
                    ) from dropped
                return transcript
    return transcript


class _Dropped(Exception):
    pass


MAX_REFUSAL = 200


def refusal_text(exc: Any) -> str:
    """One line for a refused websocket handshake: `HTTP 401: <the answer's first words>`.
    websocket-client's own text carries the answer's headers and raw bytes (`Handshake status 401
    Unauthorized -+-+- {'content-type': ...} -+-+- b'...'`), which is no message for a user."""
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "resp_body", None)
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:  # an ARM-shaped error body: its code and message
        err = json.loads(text).get("error") or {}
        text = f"{err.get('code', '')}: {err.get('message', '')}".strip(": ")
    except (ValueError, AttributeError):
        pass
    words = " ".join(text.split())
    if len(words) > MAX_REFUSAL:
        words = words[: MAX_REFUSAL - 3] + "..."
    head = f"HTTP {status}" if status else "handshake refused"
    return f"{head}: {words}" if words else head


def _sslopt(verify: str | bool) -> dict[str, Any]:
    import ssl

    if isinstance(verify, str):
        return {"ca_certs": verify, "cert_reqs": ssl.CERT_REQUIRED}
    return {"cert_reqs": ssl.CERT_REQUIRED if verify else ssl.CERT_NONE}


def _session(
    endpoint: str,
    token: str,
    command: str,
    stdin: str | None,
    nonce: str | None,
    verify: str | bool,
    deadline: float,
    connect: Connect,
    clock: Callable[[], float],
    out: Transcript,
) -> None:
    import websocket

    url = exec_url(endpoint, command)
    try:
        ws = connect(
            url,
            header=[f"Authorization: Bearer {token}"],
            sslopt=_sslopt(verify),
            timeout=max(1.0, min(30.0, deadline - clock())),
            enable_multithread=True,
        )
    except websocket.WebSocketBadStatusException as exc:
        host = urlsplit(endpoint).netloc or endpoint.split("?")[0]  # the replica is named by the caller
        raise CloudError(f"exec refused by {host}: {refusal_text(exc)}", code="ExecRejected") from exc
    except (OSError, websocket.WebSocketException) as exc:
        raise _Dropped(str(exc)) from exc
    pattern = marker_regex(nonce) if nonce else None
    connected_by = clock() + CONNECTED_WAIT_S
    try:
        _converse(ws, stdin, pattern, deadline, connected_by, clock, out)
    except (OSError, websocket.WebSocketException) as exc:  # a send on a socket that just dropped
        out.closed = True
        if stdin is not None and not out.sent:
            raise _Dropped(str(exc)) from exc
    finally:
        with contextlib.suppress(Exception):
            ws.close()


def _converse(
    ws: Any,
    stdin: str | None,
    pattern: Any,
    deadline: float,
    connected_by: float,
    clock: Callable[[], float],
    out: Transcript,
) -> None:
    """Resize, stdin once, frames until the marker (and a short drain), the close, or the deadline."""
    import websocket

    ws.send_binary(encode_resize(*TERMINAL_SIZE))
    drain_until: float | None = None
    while True:
        now = clock()
        if now >= deadline or (drain_until is not None and now >= drain_until):
            return
        if stdin is not None and not out.sent and (now >= connected_by or _looks_connected(out)):
            payload = stdin.encode("utf-8")
            for start in range(0, len(payload), STDIN_FRAME):  # large input: several frames
                ws.send_binary(encode_stdin(payload[start : start + STDIN_FRAME]))
            out.sent = True
        ws.settimeout(max(0.05, min(RECV_SLICE_S, (drain_until or deadline) - now)))
        try:
            opcode, data = ws.recv_data()
        except websocket.WebSocketTimeoutException:
            continue
        except websocket.WebSocketConnectionClosedException:
            out.closed = True
            if stdin is not None and not out.sent:
                raise _Dropped("closed before the command was sent") from None
            return
        except (OSError, websocket.WebSocketException) as exc:
            if stdin is not None and not out.sent:
                raise _Dropped(str(exc)) from exc
            out.closed = True
            return
        if opcode == websocket.ABNF.OPCODE_CLOSE or (not data and opcode != websocket.ABNF.OPCODE_TEXT):
            out.closed = True
            if stdin is not None and not out.sent and not out.errors:
                raise _Dropped("closed before the command was sent")
            return
        frame = decode_frame(data if opcode == websocket.ABNF.OPCODE_BINARY else _text(data))
        _collect(out, frame)
        if frame.kind == "error":
            return
        if pattern is not None and drain_until is None and pattern.search(out.stdout):
            # stderr and the close can trail the marker: collect them for a moment, then stop
            drain_until = min(deadline, clock() + DRAIN_S)


def _looks_connected(out: Transcript) -> bool:
    return any("connected" in info.lower() for info in out.infos) or bool(out.stdout)


def _collect(out: Transcript, frame: Frame) -> None:
    if frame.kind == "stdout":
        out.stdout += frame.text
    elif frame.kind == "stderr":
        out.stderr += frame.text
    elif frame.kind == "info":
        out.infos.append(frame.text)
    elif frame.kind == "error":
        out.errors.append(frame.text)
