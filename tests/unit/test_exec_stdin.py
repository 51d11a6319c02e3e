"""The argv wrapper that feeds local stdin to a remote command, run here through a real `sh`."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess

from aca_gpu.azure.dataplane import STDIN_ARG, with_stdin


def test_no_input_is_end_of_input() -> None:
    done = subprocess.run(with_stdin(["cat"], None), capture_output=True, timeout=10, check=False)
    assert (done.returncode, done.stdout) == (0, b"")


def test_data_larger_than_one_argument_arrives_intact() -> None:
    data = os.urandom(STDIN_ARG * 2)
    done = subprocess.run(with_stdin(["sha256sum"], data), capture_output=True, timeout=10, check=False)
    assert done.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_arguments_and_exit_code_survive_the_wrapping() -> None:
    argv = ["sh", "-c", 'read x; printf "%s|%s|%s" "$x" "$0" "$1"; exit 3', "a b", "c'd"]
    done = subprocess.run(with_stdin(argv, b"in put\n"), capture_output=True, timeout=10, check=False)
    assert (done.returncode, done.stdout) == (3, b"in put|a b|c'd")


def test_the_shell_line_has_no_long_lines() -> None:
    """A TTY session caps a line at 4095 characters: the quoted script keeps every line short."""
    line = shlex.join(with_stdin(["cat"], os.urandom(300_000)))
    assert max(len(part) for part in line.split("\n")) < 4095
