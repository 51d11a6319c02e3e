"""A pseudo-terminal that reports 0x0 columns and rows (`script -qfc ...` in a CI container) gets a
sane width: the summary is printed, never `unexpected ValueError: invalid width 0`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from aca_gpu.output import terminal_width

IMAGE = "nvidia/cuda:12.8.0-base-ubuntu24.04"


def test_terminal_width_falls_back_when_the_terminal_says_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = os.openpty()  # a new pty reports 0x0 until someone sets its size
    try:
        with os.fdopen(os.dup(slave), "w") as stream:
            assert os.get_terminal_size(slave).columns == 0
            assert terminal_width(stream) == 100
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize(
    "args", [["compat", "--image", IMAGE, "--driver", "550.144.03"], ["profiles", "--offline"]]
)
def test_commands_finish_on_a_zero_size_terminal(args: list[str]) -> None:
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "aca_gpu", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            timeout=60,
            check=False,
        )
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "invalid width" not in text and "unexpected" not in text, text
    assert proc.returncode in (0, 5), text
