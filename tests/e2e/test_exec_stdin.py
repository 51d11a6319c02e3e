"""`acagpu exec` with piped stdin, and the confirmation rule, with real processes against
`acagpu emulator serve` (as a user types them in a second shell)."""

from __future__ import annotations

import hashlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A served emulator with one kept run `pipe1`; yields the second shell's environment."""
    env_file = tmp_path_factory.mktemp("serve") / "emu.env"
    with emulator_serve(env_file) as served:
        assert env_file.stat().st_mode & 0o777 == 0o600, "the env file holds a token: owner-only"
        env = os.environ | served | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        env.pop("ACAGPU_CONFIG", None)
        up = run(env, "up", "--yes", "--run-id", "pipe1", "--keep")
        assert up.returncode == 0, up.stderr
        yield env


def run(
    env: dict[str, str], *args: str, stdin: bytes | int | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    kwargs: dict[str, object] = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
    return subprocess.run(
        [*ACAGPU, *args], env=env, capture_output=True, timeout=timeout, check=False, **kwargs
    )  # type: ignore[call-overload, no-any-return]


def test_piped_stdin_reaches_the_remote_command(shell: dict[str, str]) -> None:
    done = run(shell, "exec", "--run-id", "pipe1", "--", "cat", stdin=b"hi\n")
    assert (done.returncode, done.stdout) == (0, b"hi\n"), done.stderr


def test_empty_stdin_is_end_of_input(shell: dict[str, str]) -> None:
    started = time.monotonic()
    done = run(shell, "exec", "--run-id", "pipe1", "--", "cat", stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert time.monotonic() - started < 30  # it returned, it did not wait for --timeout


def test_binary_stdin_arrives_intact(shell: dict[str, str]) -> None:
    data = os.urandom(200_000)
    done = run(shell, "exec", "--run-id", "pipe1", "--", "sha256sum", stdin=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_exit_code_of_a_piped_command_is_kept(shell: dict[str, str]) -> None:
    done = run(shell, "exec", "--run-id", "pipe1", "--", "sh", "-c", "read x; exit $x", stdin=b"7\n")
    assert done.returncode == 7, done.stderr


def test_timeout_is_exit_4(shell: dict[str, str]) -> None:
    done = run(shell, "exec", "--run-id", "pipe1", "--timeout", "3", "--", "sleep", "30", stdin=b"")
    assert done.returncode == 4, done.stderr
    assert any(line.startswith("error: --timeout 3s passed") for line in done.stderr.decode().splitlines())


def _on_a_terminal(env: dict[str, str], args: list[str], answer: bytes) -> tuple[int, bytes]:
    """Run with stdin and stderr on a pseudo-terminal; answer the question once it is asked."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [*ACAGPU, *args], env=env, stdin=slave, stdout=subprocess.PIPE, stderr=slave, close_fds=True
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"[y/N]" not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen += os.read(master, 4096)
        os.write(master, answer)
        proc.wait(timeout=120)
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, seen


def test_a_terminal_is_asked_even_with_json_and_no_declines(shell: dict[str, str]) -> None:
    code, seen = _on_a_terminal(shell, ["down", "--run-id", "pipe1", "-o", "json"], b"n\n")
    assert b"Delete resource group rg-acagpu-pipe1" in seen, seen
    assert code == 130, seen
    status = run(shell, "status", "-o", "tsv", "--query", "runs[].run_id")
    assert status.stdout == b"pipe1\n", "a declined down deleted nothing"


def test_down_without_yes_and_no_terminal_refuses(shell: dict[str, str]) -> None:
    done = run(shell, "down", "--run-id", "pipe1", stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and b"--yes" in done.stderr, done.stderr
    status = run(shell, "status", "-o", "tsv", "--query", "runs[].run_id")
    assert status.stdout == b"pipe1\n", "the refused down deleted nothing"
    done = run(shell, "down", "--run-id", "pipe1", "--yes", stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr


def test_the_confirmation_does_not_call_its_plan_a_dry_run(shell: dict[str, str]) -> None:
    code, seen = _on_a_terminal(shell, ["up", "--run-id", "ask1"], b"n\n")
    assert b"Create these billable resources?" in seen and code == 130, seen
    assert b"dry run" not in seen and b"created once you confirm" in seen, seen
