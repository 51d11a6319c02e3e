"""A container as the emulator runs it: a sandbox directory, an environment, real exec processes.

The main process is one of three things: idle (an explorer that never exits), a script of console
lines played over scaled time (simulated runs), or a real process whose stdout+stderr become the
console. Exec always spawns a real process in its own process group, so `stop()` can kill it and
everything it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aca_gpu.emulator.workloads.base import ExecNotFound

KILLED_EXIT_CODE = 137  # what a container runtime reports for a SIGKILLed main process


def exec_not_found(command: str) -> ExecNotFound:
    """The runtime's error when the exec `command` is not one executable in the container's PATH."""
    return ExecNotFound(
        "OCI runtime exec failed: exec failed: unable to start container process: "
        f'exec: "{command}": executable file not found in $PATH: unknown'
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class SandboxContainer:
    """Implements the `Container` protocol; the workload decides what the main process does."""

    def __init__(self, *, name: str, env: Mapping[str, str], cwd: Path, hidden: Sequence[str] = ()) -> None:
        self.name = name
        self.env = dict(env)
        self.cwd = cwd
        self._hidden = set(hidden)  # executables this container must not see (nvidia-smi without a GPU)
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._streams: list[str] = []  # stdout | stderr of each console line
        self._on_stop: list[Callable[[], None]] = []
        self._exit_code: int | None = None
        self._term_code: int | None = None  # the code its main process exited with when stopped
        self._stopped = threading.Event()
        self._main: subprocess.Popen[bytes] | None = None
        self.real_process = False  # True when the main process really runs (real seconds, not scaled)
        # said once in the replica's system log when it starts (the host workload's shared GPU)
        self.notice: str | None = None
        # a served replica in a network of its own: the folder whose PORT sockets reach its ports
        # (netns.py); None when it listens on this machine's loopback
        self.endpoint: str | None = None
        # a served replica in Podman: its ports -> the loopback ports Podman publishes them on
        self.published: dict[int, int] = {}
        self._execs: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []

    # --- the Container protocol -------------------------------------------------------------------

    def exec(self, command: str) -> subprocess.Popen[bytes]:
        if not command or any(ch.isspace() for ch in command) or command in self._hidden:
            raise exec_not_found(command)
        exe = shutil.which(command, path=self.env.get("PATH", ""))
        if exe is None or Path(exe).name in self._hidden:
            raise exec_not_found(command)
        with self._lock:
            if self._stopped.is_set():
                raise exec_not_found(command)
            proc = subprocess.Popen(
                [exe],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
            self._execs = [p for p in self._execs if p.poll() is None] + [proc]
        return proc

    def logs(self, start: int = 0) -> list[str]:
        with self._lock:
            return self._lines[start:]

    def streams(self, start: int = 0) -> list[str]:
        """stdout or stderr for each console line from `start` (the CRI log's stream field)."""
        with self._lock:
            return self._streams[start:]

    @property
    def exit_code(self) -> int | None:
        with self._lock:
            return self._exit_code

    @property
    def stopped_code(self) -> int | None:
        """The exit code its main process gave itself when stopped (SIGTERM handled: the tester in
        its result grace), None when the stop killed it or it had ended before."""
        with self._lock:
            return self._term_code

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            procs = ([self._main] if self._main else []) + list(self._execs)
        for proc in procs:
            _kill_group(proc)
        for hook in self._on_stop:
            with contextlib.suppress(Exception):
                hook()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        with self._lock:
            if self._exit_code is None:
                self._exit_code = KILLED_EXIT_CODE

    # --- main process strategies ------------------------------------------------------------------

    def emit(self, line: str, stream: str = "stdout") -> None:
        with self._lock:
            self._lines.append(line)
            self._streams.append(stream)

    def on_stop(self, hook: Callable[[], None]) -> None:
        """Run `hook` when the container stops (remove what the main process left behind)."""
        self._on_stop.append(hook)

    def run_streams(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """Run a real main process with stdout and stderr kept apart, line by line, in arrival order."""
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=self.cwd,
            start_new_session=True,
        )
        with self._lock:
            self._main = proc
            self.real_process = True  # a shell line or a Podman container lives in real seconds

        def pump(pipe: Any, stream: str) -> None:
            for raw in iter(pipe.readline, b""):
                self.emit(raw.decode("utf-8", "replace").rstrip("\r\n"), stream)
            pipe.close()

        readers = [
            threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True),
        ]
        for reader in readers:
            reader.start()

        def wait() -> None:
            for reader in readers:
                reader.join()
            code = proc.wait()
            self._finish(128 - code if code < 0 else code)

        self._start_thread(wait, "wait")

    def _finish(self, code: int) -> None:
        with self._lock:
            if self._exit_code is None:
                self._exit_code = code

    def idle(self) -> None:
        """An explorer (`sleep infinity`): nothing runs, nothing is printed, it never exits."""

    def play(self, script: Sequence[tuple[float, str]], exit_code: int, linger: float = 0.0) -> None:
        """Print each line after its delay (seconds, already scaled), stay `linger` seconds more (the
        tester's result grace period), then exit with `exit_code`. Stopped during its linger, it
        exits with `exit_code` all the same, as the real tester's SIGTERM handler does
        (templates/gpu-tester `linger`); stopped before, it is killed (no code of its own)."""

        def run() -> None:
            for delay, line in script:
                if self._stopped.wait(delay):
                    return
                self.emit(line)
            if self._stopped.wait(max(0.0, linger)):
                self._term_code = exit_code
            self._finish(exit_code)

        self._start_thread(run, "play")

    def run_process(self, argv: Sequence[str]) -> None:
        """Run a real main process; its stdout and stderr lines are the console."""
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
        )
        with self._lock:
            self._main = proc
            self.real_process = True

        def pump() -> None:
            assert proc.stdout is not None
            for raw in iter(proc.stdout.readline, b""):
                self.emit(raw.decode("utf-8", "replace").rstrip("\r\n"))
            proc.stdout.close()
            code = proc.wait()
            self._finish(128 - code if code < 0 else code)

        self._start_thread(pump, "pump")

    def fail_to_run(self, message: str, code: int = 127) -> None:
        """The main process could not be executed (e.g. the image has no such binary)."""
        self.emit(message)
        self._finish(code)

    def _start_thread(self, target: Callable[[], None], what: str) -> None:
        thread = threading.Thread(target=target, name=f"container-{self.name}-{what}", daemon=True)
        self._threads.append(thread)
        thread.start()
