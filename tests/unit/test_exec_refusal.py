"""A refused exec handshake in one line: websocket-client's own text carries the answer's headers
and raw bytes; acagpu says the status and the answer's words, whatever the body is."""

from __future__ import annotations

import websocket

from aca_gpu.azure.dataplane import MAX_REFUSAL, refusal_text


def _refused(status: int, body: bytes) -> websocket.WebSocketBadStatusException:
    headers = {"content-type": "text/plain", "date": "Fri, 27 Nov 2026 06:44:15 GMT", "server": "x"}
    return websocket.WebSocketBadStatusException(
        f"Handshake status {status} -+-+- {headers} -+-+- {body!r}", status, "Refused", headers, body
    )


def test_a_refusal_is_its_status_and_words() -> None:
    assert refusal_text(_refused(401, b"Unauthorized: token is not valid\nfor this resource")) == (
        "HTTP 401: Unauthorized: token is not valid for this resource"
    )
    arm = b'{"error": {"code": "ServiceUnavailable", "message": "Please retry later."}}'
    assert refusal_text(_refused(503, arm)) == "HTTP 503: ServiceUnavailable: Please retry later."
    assert refusal_text(_refused(502, b"")) == "HTTP 502"


def test_a_long_answer_is_cut_and_never_shows_headers() -> None:
    text = refusal_text(_refused(500, b"<html>" + b"x " * 500 + b"</html>"))
    assert text.startswith("HTTP 500: <html>") and len(text) <= len("HTTP 500: ") + MAX_REFUSAL
    assert "\n" not in text and "-+-+-" not in text and "content-type" not in text
