"""Run a command and stamp each of its stderr lines when it arrives, in a process of its own.

`python stamp_lines.py CMD...` starts CMD (stdout passed through), reads its stderr line by line and
writes `<monotonic s>\t<busy s>\t<held s>\t<line>` to its own stderr for each, after a first
`<monotonic s>\t0\t<held s>\t` record when CMD has started. Busy: CMD's main thread's time on a CPU
and waiting for one, and every other thread's wait for a CPU (Linux's per-thread schedstat), so a
start-up or a busy stretch on a loaded machine is not taken for a silent wait. Held: this process's
own wait for a CPU, so a line that waited for the stamper is not taken for one either.

Stamping happens here and not in the test's own reader thread: the test's process also runs the
emulator, and a reader waiting for Python's GIL there is neither on a CPU nor waiting for one, so
lines written on time arrived in a burst seconds later and read as seconds of silence.
Exits with CMD's code (128 + the signal's number when a signal ended it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import suppress


def _schedstat(pid: int, tid: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable but waiting for a CPU) of one thread; (0, 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
            fields = f.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0, 0


def _busy_s(pid: int, seen: dict[int, int]) -> float:
    """`seen` keeps each thread's last figure, so a thread that has ended still counts."""
    with suppress(OSError):
        for tid in (int(t) for t in os.listdir(f"/proc/{pid}/task")):
            on_cpu, queued = _schedstat(pid, tid)
            if on_cpu or queued:
                seen[tid] = queued + (on_cpu if tid == pid else 0)
    return sum(seen.values()) / 1e9


def _held_s() -> float:
    return _schedstat(os.getpid(), os.getpid())[1] / 1e9


def main(argv: list[str]) -> int:
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    out = sys.stderr.buffer
    out.write(f"{time.monotonic():.6f}\t0\t{_held_s():.6f}\t\n".encode())
    out.flush()
    seen: dict[int, int] = {}
    for raw in proc.stderr:
        stamp = f"{time.monotonic():.6f}\t{_busy_s(proc.pid, seen):.6f}\t{_held_s():.6f}\t"
        out.write(stamp.encode() + raw.rstrip(b"\n") + b"\n")
        out.flush()
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
