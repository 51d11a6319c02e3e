"""Run one container to completion and keep everything it said, as a plain record.

A container that never started is told apart from a program that ran and failed by the runtime's
own exit codes (Docker and Podman: 125 the runtime failed, 126 the command could not be invoked,
127 it was not found; Apptainer: 255 with a `FATAL:` line), and the runtime's text is kept as the
refusal. A deadline kills the client and removes the named container, so nothing is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from aca_gpu.local.commands import ContainerCommand, remove_command

REFUSED_CODES = {"docker": (125, 126, 127), "podman": (125, 126, 127), "apptainer": (255,)}


@dataclass(frozen=True)
class ContainerRun:
    """What one run produced; `refused` holds the runtime's reason when the container did not start."""

    runtime: str
    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    refused: str | None = None
    timed_out: bool = False
    cancelled: bool = False  # stopped on purpose (the verdict was already known)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def as_dict(self) -> dict[str, object]:
        return {
            "runtime": self.runtime,
            "command": self.command,
            "exit_code": self.exit_code,
            "refused": self.refused,
            "timed_out": self.timed_out,
            "cancelled": self.cancelled,
            "seconds": round(self.seconds, 3),
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


def refusal(runtime: str, exit_code: int | None, stderr: str) -> str | None:
    """The runtime's own line saying why the container did not start, or None if it ran."""
    if exit_code is None or exit_code not in REFUSED_CODES.get(runtime, ()):
        return None
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if runtime == "apptainer":
        fatal = [line for line in lines if line.startswith("FATAL")]
        return fatal[-1] if fatal else None
    errors = [line for line in lines if line.lower().startswith(("error", "docker:", "podman:"))]
    if errors:
        return errors[-1]
    return lines[-1] if lines else f"{runtime} exited {exit_code} without a message"


# named containers this process started and has not seen end: after Ctrl-C the thread running one
# is still killing and removing it when the engine tears down, and the process must not exit first
_LIVE: dict[str, ContainerCommand] = {}
_LIVE_LOCK = threading.Lock()


def _spawn(command: ContainerCommand) -> subprocess.Popen[bytes]:
    """Start the runtime client in its own session, so a kill of its group reaches what it forked."""
    if command.name:
        with _LIVE_LOCK:
            _LIVE[command.name] = command
    return subprocess.Popen(
        command.argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **command.env},
        start_new_session=True,
    )


def _gone(command: ContainerCommand) -> None:
    """The container ended (`--rm` removed it) or was removed: no longer this process's."""
    if command.name:
        with _LIVE_LOCK:
            _LIVE.pop(command.name, None)


def live(marker: str) -> list[str]:
    """The named containers of this process not yet seen gone whose names hold `marker` (a run id)."""
    with _LIVE_LOCK:
        return sorted(name for name in _LIVE if marker in name)


def remove_live(marker: str) -> list[str]:
    """Remove (and see gone) every container `live(marker)` names; a thread still removing one
    races nothing: a second `rm -f` of it is harmless. Returns the names."""
    with _LIVE_LOCK:
        commands = [c for name, c in _LIVE.items() if marker in name]
    for command in commands:
        _remove(command)
        _gone(command)
    return sorted(c.name for c in commands if c.name)


def run_container(
    command: ContainerCommand, timeout: float, cancel: threading.Event | None = None
) -> ContainerRun:
    """Run it; never raises for the container's own failures. `cancel` stops it early."""
    started = time.monotonic()
    proc = _spawn(command)
    deadline = started + timeout
    stopped: str | None = None
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=max(0.01, min(0.25, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    stopped = "cancelled"
                elif time.monotonic() >= deadline:
                    stopped = "timed_out"
                if stopped:
                    os.killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate()
                    _remove(command)
                    break
    except BaseException:  # Ctrl-C: the container must not outlive us
        _kill(proc, command)
        raise
    _gone(command)
    stderr = err.decode("utf-8", "replace")
    code = None if stopped else proc.returncode
    return ContainerRun(
        command.runtime,
        command.display(),
        code,
        out.decode("utf-8", "replace"),
        stderr,
        time.monotonic() - started,
        refused=None if stopped else refusal(command.runtime, code, stderr),
        timed_out=stopped == "timed_out",
        cancelled=stopped == "cancelled",
    )


def _kill(proc: subprocess.Popen[bytes], command: ContainerCommand) -> None:
    """Kill the client's whole group, reap it, and remove the container it may have left running."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _remove(command)
    _gone(command)


REMOVE_WAIT_S = 15.0  # a container the runtime is still creating or removing answers `rm` too early


def _remove(command: ContainerCommand) -> None:
    """Remove the named container and see it gone: a `rm` that races the runtime's own create or
    `--rm` cleanup can return while the container is still listed, so it is sent again until not."""
    argv = remove_command(command.runtime, command.name, command.argv[0]) if command.name else None
    if argv is None or command.name is None:
        return
    listing = [command.argv[0], "ps", "-a", "-q", "--filter", f"name=^{command.name}$"]
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        subprocess.run(argv, capture_output=True, timeout=60, check=False)
        left = subprocess.run(listing, capture_output=True, text=True, timeout=60, check=False)
        if left.returncode != 0 or not left.stdout.strip() or time.monotonic() >= deadline:
            return
        time.sleep(0.5)


LineSink = Callable[[str, str], None]  # (stream: "stdout" | "stderr", line without its newline)
REFUSAL_TAIL = 50  # stderr lines kept to tell a refused container from a program that failed


def stream_container(
    command: ContainerCommand, timeout: float, cancel: threading.Event, on_line: LineSink
) -> ContainerRun:
    """Run it like `run_container`, but hand every stdout/stderr line to `on_line` as it arrives.

    The record keeps only stderr's tail (for the refusal); the caller's sink owns the output. A
    deadline or `cancel` kills the client and removes the named container, as Ctrl-C does.
    """
    started = time.monotonic()
    proc = _spawn(command)
    tail: deque[str] = deque(maxlen=REFUSAL_TAIL)

    def pump(pipe: object, stream: str) -> None:
        for raw in iter(pipe.readline, b""):  # type: ignore[attr-defined]
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if stream == "stderr":
                tail.append(line)
            on_line(stream, line)

    readers = [
        threading.Thread(target=pump, args=(getattr(proc, name), name), daemon=True, name=f"acagpu-{name}")
        for name in ("stdout", "stderr")
    ]
    for reader in readers:
        reader.start()
    deadline = started + timeout
    stopped: str | None = None
    try:
        while proc.poll() is None:
            if cancel.wait(0.05):
                stopped = "cancelled"
            elif time.monotonic() >= deadline:
                stopped = "timed_out"
            if stopped:
                _kill(proc, command)
                break
    except BaseException:  # Ctrl-C: the container must not outlive us
        _kill(proc, command)
        raise
    _gone(command)
    for reader in readers:
        reader.join(timeout=5)
    stderr = "\n".join(tail)
    code = None if stopped else proc.returncode
    return ContainerRun(
        command.runtime,
        command.display(),
        code,
        "",
        stderr,
        time.monotonic() - started,
        refused=None if stopped else refusal(command.runtime, code, stderr),
        timed_out=stopped == "timed_out",
        cancelled=stopped == "cancelled",
    )
