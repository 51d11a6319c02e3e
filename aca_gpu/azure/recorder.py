"""Where `--record` taps the traffic: one azure-core policy for every ARM SDK client, a transport
for the Azure Files client (the storage SDK builds its own pipeline, with no slot for a policy), and
wrappers for the two other data-plane transports (the log/event stream over requests, the exec
websocket).

The policy sits in the `http_logging_policy` slot, the last one before the transport, so it sees
every attempt as sent (after retries and the api-version fallback) and every answer as received;
it still logs like ARM's own logging policy. aca_gpu/recording.py sanitizes and writes.
"""

from __future__ import annotations

from typing import Any

from azure.core.pipeline import PipelineRequest, PipelineResponse
from azure.core.pipeline.transport import HttpTransport
from azure.mgmt.core.policies import ARMHttpLoggingPolicy

from aca_gpu import recording


class RecordingPolicy(ARMHttpLoggingPolicy):
    """ARM's HTTP logging, plus one sanitized line per exchange when a recording is active."""

    def on_response(self, request: PipelineRequest, response: PipelineResponse) -> None:  # type: ignore[type-arg]
        super().on_response(request, response)
        recorder = recording.active()
        if recorder is None:
            return
        http, answer = request.http_request, response.http_response
        try:
            text = answer.text()
        except Exception:  # a body that cannot be read as text is recorded as absent
            text = ""
        body = http.body if isinstance(http.body, (str, bytes)) else None
        recorder.exchange(http.method, http.url, body, answer.status_code, dict(answer.headers), text)


class RecordingTransport(HttpTransport[Any, Any]):
    """azure-core's requests transport, recording each exchange as sent and answered.

    A transport sees the request after signing, but only the method, URL and body are recorded:
    the SharedKey `Authorization` header never is, and a SAS `sig=` in the URL is scrubbed by the
    recording's sanitizer. A downloaded body is read here whole (requests keeps it for the SDK's
    own reading) and recorded as text (binary content as UTF-8 with replacement characters)."""

    def __init__(self, inner: HttpTransport[Any, Any]) -> None:
        self._inner = inner

    def __enter__(self) -> RecordingTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def send(self, request: Any, **kwargs: Any) -> Any:
        response = self._inner.send(request, **kwargs)
        recorder = recording.active()
        if recorder is not None:
            try:
                data = response.body()
                text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
            except Exception:  # a body that cannot be read is recorded as absent
                text = ""
            body = request.body if isinstance(request.body, (str, bytes)) else None
            recorder.exchange(
                request.method, request.url, body, response.status_code, dict(response.headers), text
            )
        return response


def storage_options(verify: str | bool) -> dict[str, Any]:
    """Keyword arguments for a storage SDK client: a recording transport while `--record` runs."""
    if recording.active() is None:
        return {}
    from azure.core.pipeline.transport import RequestsTransport

    # the storage SDK's own defaults for a transport it makes itself (20 s connect, 60 s read)
    inner = RequestsTransport(connection_verify=verify, connection_timeout=20, read_timeout=60)
    return {"transport": RecordingTransport(inner)}


def policy_options() -> dict[str, Any]:
    """Client keyword arguments: the recording policy in place of ARM's logging policy."""
    return {"http_logging_policy": RecordingPolicy()}


class RecordedStream:
    """A streaming requests.Response whose lines are recorded when the stream is closed."""

    def __init__(self, response: Any, method: str, url: str) -> None:
        self._response = response
        self._method, self._url = method, url
        self._lines: list[str] = []
        self._done = False
        self.status_code = response.status_code
        self.headers = response.headers

    @property
    def text(self) -> str:
        text = str(self._response.text or "")
        self._lines.append(text)
        return text

    def iter_lines(self, **kwargs: Any) -> Any:
        for raw in self._response.iter_lines(**kwargs):
            if raw is not None:
                self._lines.append(raw if isinstance(raw, str) else raw.decode("utf-8", "replace"))
            yield raw

    def close(self) -> None:
        self._response.close()
        recorder = recording.active()
        if recorder is not None and not self._done:
            self._done = True
            body = "\n".join(ln for ln in self._lines if ln.strip())
            recorder.exchange(self._method, self._url, None, self.status_code, dict(self.headers), body)


class RecordedSocket:
    """A websocket-client connection whose frames (both ways) are recorded when it closes."""

    def __init__(self, ws: Any, url: str) -> None:
        self._ws = ws
        self._url = url
        self._frames: list[dict[str, Any]] = []
        self._done = False

    def send_binary(self, data: bytes) -> Any:
        self._frames.append({"dir": "out", "head": list(data[:2]), "text": _text(data[2:])})
        return self._ws.send_binary(data)

    def recv_data(self, *args: Any, **kwargs: Any) -> Any:
        opcode, data = self._ws.recv_data(*args, **kwargs)
        if isinstance(data, bytes) and opcode == 2:  # binary
            head = 2 if data[:1] == b"\x00" else 1
            self._frames.append({"dir": "in", "head": list(data[:head]), "text": _text(data[head:])})
        elif opcode == 1:
            self._frames.append({"dir": "in", "opcode": "text", "text": _text(data)})
        elif opcode == 8:
            self._frames.append({"dir": "in", "opcode": "close"})
        return opcode, data

    def settimeout(self, value: float) -> None:
        self._ws.settimeout(value)

    def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._ws.close(*args, **kwargs)
        finally:
            recorder = recording.active()
            if recorder is not None and not self._done:
                self._done = True
                recorder.websocket(self._url, 101, self._frames)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ws, name)


def _text(data: bytes | str) -> str:
    if isinstance(data, str):
        return data
    return data.decode("utf-8", "replace")


def stream(response: Any, method: str, url: str) -> Any:
    """`response`, recorded when a recording is active."""
    return response if recording.active() is None else RecordedStream(response, method, url)


def socket(ws: Any, url: str) -> Any:
    return ws if recording.active() is None else RecordedSocket(ws, url)
