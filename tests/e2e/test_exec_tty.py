"""Piped stdin through an exec session that behaves like a TTY (echo, CRLF), as ACA's may."""

from __future__ import annotations

import os
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli


def test_piped_input_survives_an_echoing_session(emu: Any) -> None:
    assert CliRunner().invoke(cli, ["up", "--yes", "--run-id", "tty1", "--keep"]).exit_code == 0
    try:
        emu.set_faults("tty_echo")
        data = os.urandom(1000).hex() + "\n"
        result = CliRunner().invoke(cli, ["exec", "--run-id", "tty1", "--", "cat"], input=data)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == data
        result = CliRunner().invoke(cli, ["exec", "--run-id", "tty1", "--", "sh", "-c", "exit 4"], input="")
        assert result.exit_code == 4, result.stderr
    finally:
        emu.set_faults("")
        assert CliRunner().invoke(cli, ["down", "--run-id", "tty1", "--yes"]).exit_code == 0
