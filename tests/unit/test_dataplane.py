"""Exec framing and transcript parsing, on byte sequences from the reference (aca-api.md §3.2-3.4)."""

from __future__ import annotations

import json

import pytest

from aca_gpu.azure import dataplane as dp


def test_stdin_frame_is_00_00_then_bytes() -> None:
    assert dp.encode_stdin("ls\n") == b"\x00\x00ls\n"
    assert dp.encode_stdin(b"\x03") == b"\x00\x00\x03"  # Ctrl-C as the CLI sends it


def test_resize_frame_is_00_04_then_json() -> None:
    frame = dp.encode_resize(120, 40)
    assert frame[:2] == b"\x00\x04"
    assert json.loads(frame[2:]) == {"Width": 120, "Height": 40}


@pytest.mark.parametrize(
    ("raw", "kind", "text", "channel"),
    [
        (b"\x00\x01hello\r\n", "stdout", "hello\r\n", 1),
        (b"\x00\x02oops\n", "stderr", "oops\n", 2),
        (b"\x00\x03{}", "other", "{}", 3),  # k8s status channel: not known to be forwarded
        (b"\x01Connecting to the container 'c'...", "info", "Connecting to the container 'c'...", None),
        (
            b"\x01Successfully connected to container: 'c'. [ Revision: 'r', Replica: 'p']",
            "info",
            "Successfully connected to container: 'c'. [ Revision: 'r', Replica: 'p']",
            None,
        ),
        (
            b'\x02{"Error":{"Code":"ClusterExecFailure"}}',
            "error",
            '{"Error":{"Code":"ClusterExecFailure"}}',
            None,
        ),
        (b"\x00\x01caf\xe9", "stdout", "café", 1),  # not UTF-8: latin-1 fallback like the CLI
    ],
)
def test_decode_server_frames(raw: bytes, kind: str, text: str, channel: int | None) -> None:
    frame = dp.decode_frame(raw)
    assert (frame.kind, frame.text, frame.channel) == (kind, text, channel)


def test_decode_empty_and_short_frames_do_not_crash() -> None:
    assert dp.decode_frame(b"").kind == "other"
    assert dp.decode_frame(b"\x00").kind == "other"


def test_exec_url_quotes_the_single_command() -> None:
    url = dp.exec_url("wss://eastus.azurecontainerapps.dev/x/containers/c/exec", "nvidia-smi")
    assert url.endswith("/exec?command=nvidia-smi")
    assert dp.exec_url("wss://h/exec?a=1", "sh").endswith("?a=1&command=sh")


def test_shell_script_quotes_argv_and_carries_exit_status() -> None:
    script = dp.shell_script(["sh", "-c", "exit 3"], "abc")
    assert script == "sh -c 'exit 3'; echo \"__ACAGPU_EXIT_abc__$?\"\nexit\n"


NONCE = "5f1e2d3c4b5a"
LINE = dp.command_line(["nvidia-smi", "-L"], NONCE)


def test_plain_session_output_and_code() -> None:
    stdout = f"GPU 0: Tesla T4 (UUID: GPU-1)\n__ACAGPU_EXIT_{NONCE}__0\n"
    assert dp.clean_transcript(stdout, NONCE) == ("GPU 0: Tesla T4 (UUID: GPU-1)\n", 0)


def test_tty_session_strips_echo_prompt_and_crlf() -> None:
    # a TTY echoes the typed line (the marker text with `$?`), then output with CRLF, then the prompt
    stdout = f"# {LINE}\r\nexit\r\nGPU 0: Tesla T4 (UUID: GPU-1)\r\n__ACAGPU_EXIT_{NONCE}__0\r\n# exit\r\n"
    output, code = dp.clean_transcript(stdout, NONCE)
    assert output == "GPU 0: Tesla T4 (UUID: GPU-1)\n"
    assert code == 0


def test_echoed_command_is_never_the_result_marker() -> None:
    # the session ended after the echo but before the command finished
    stdout = f"$ {LINE}\r\npartial output\r\n"
    output, code = dp.clean_transcript(stdout, NONCE)
    assert code is None
    assert output == "partial output\n"
    assert dp.find_exit_code(stdout, NONCE) is None


def test_nonzero_code_and_output_without_trailing_newline() -> None:
    stdout = f"no newline__ACAGPU_EXIT_{NONCE}__3\n"
    assert dp.clean_transcript(stdout, NONCE) == ("no newline", 3)


def test_other_nonce_is_ignored() -> None:
    stdout = "__ACAGPU_EXIT_000000000000__0\n"
    assert dp.clean_transcript(stdout, NONCE) == (stdout, None)


def test_error_message_from_cluster_exec_failure() -> None:
    # aca-api.md §3.2: `--command "ls -la"` → proxy error frame
    body = (
        '{"Error":{"Code":"ClusterExecFailure","Message":"Cluster exec API returns error: '
        'exec: \\"ls -la\\": executable file not found in $PATH"}}'
    )
    frame = dp.decode_frame(b"\x02" + body.encode())
    message = dp.error_message([frame.text])
    assert message.startswith("ClusterExecFailure: Cluster exec API returns error")
    assert "executable file not found" in message


def test_error_message_plain_text() -> None:
    assert dp.error_message(["  upstream   closed \n"]) == "upstream closed"
