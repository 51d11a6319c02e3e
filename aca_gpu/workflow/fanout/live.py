"""What a person sees while a fan-out runs: shard lines prefixed `[k]`, and a status table.

`--logs all` prints every shard's lines as they come, `failed` keeps each shard's lines and prints
them once the shard has failed for good, `none` prints none (the JSON document keeps each shard's
last lines either way). The table line (queued / starting / running / retrying / succeeded / failed,
GPU-seconds and cost so far, an ETA) is printed on stderr at most every few seconds, and after every
shard's end once the runner has started what its end let start (a line printed between the two
would show one shard fewer running than run at once). `starting` is an attempt started and not
yet running (placement, pull, create): it holds one of the P places but bills nothing yet.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from aca_gpu.output import terminal_width
from aca_gpu.units import gpu_seconds_text, usd_text
from aca_gpu.workflow.engine.task_records import Attempt, TaskState

TAIL_LINES = 20  # a shard's last lines kept for the document
TERMINAL_EVERY_S = 2.0
PIPE_EVERY_S = 10.0


class ShardConsole:
    """The `Console` of one shard attempt for the shared log follower: prefixes, routes, keeps."""

    def __init__(self, board: Board, index: int) -> None:
        self.board, self.index = board, index
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)  # the container's own lines only
        self.notes: list[str] = []  # what acagpu said of its output (a stream that fell short, ...)
        self.held: list[tuple[str, str]] = []
        self.released = False  # --logs failed: it failed for good; a line read later prints at once
        self._lock = threading.Lock()

    def note(self, text: str) -> None:
        """Kept apart from the container's lines: a caller reading a shard's last line as its answer
        must not get acagpu's words (`notes` in the document and the API's ShardResult)."""
        self.notes.append(text)

    def line(self, stream: str, text: str, source: str = "stream") -> None:
        """One line of the shard's (`source`: where the follower read it), its secrets masked."""
        mask = self.board.mask
        text = mask(text) if mask is not None else text
        self.tail.append(text)
        if self.board.logs == "all":
            self.board.print_line(stream, f"[{self.index}] {text}")
        elif self.board.logs == "failed":
            with self._lock:
                now = self.released
                if not now and len(self.held) < 10_000:
                    self.held.append((stream, text))
            if now:  # read after its failure (Log Analytics comes late): it prints now
                self.board.print_line(stream, f"[{self.index}] {text}")

    def release(self) -> None:
        """The shard failed for good: with --logs failed its lines print now, and any read later."""
        with self._lock:
            held, self.held, self.released = self.held, [], True
        for stream, text in held:
            self.board.print_line(stream, f"[{self.index}] {text}")


class Board:
    """Counts and the live table; every print goes through one lock, so lines never interleave."""

    def __init__(
        self,
        total: int,
        *,
        live: bool,
        logs: str,
        stdout: Callable[[], TextIO],
        stderr: Callable[[], TextIO],
        usd_per_gpu_s: float,
        terminal: bool,
    ) -> None:
        self.total, self.live, self.logs = total, live, logs
        self._out, self._err = stdout, stderr
        self.usd_per_s = usd_per_gpu_s
        self.every = TERMINAL_EVERY_S if terminal else PIPE_EVERY_S
        self._lock = threading.Lock()
        self._last = 0.0
        self.began = time.monotonic()
        self.states: list[TaskState] = []
        self.consoles: dict[int, ShardConsole] = {}
        self.mask: Callable[[str], str] | None = None  # the run's --secret-env values hidden
        self._ended = False  # a shard ended since the last line: the next look prints one
        self._said_gpu_s = 0.0
        self.terminal = terminal

    def console(self, index: int) -> ShardConsole:
        with self._lock:
            return self.consoles.setdefault(index, ShardConsole(self, index))

    def print_line(self, stream: str, text: str) -> None:
        if not self.live:
            return
        with self._lock:
            print(text, file=self._out() if stream == "stdout" else self._err(), flush=True)

    def changed(self, state: TaskState, attempt: Attempt) -> None:
        if state.state == "failed":
            self.console(state.task.index).release()
            if self.live:
                self.print_line("stderr", f"[{state.task.index}] failed: {attempt.reason}")
        elif state.state == "retrying" and self.live:
            whose = "the platform's" if attempt.fault == "platform" else "the container's"
            self.print_line("stderr", f"[{state.task.index}] retrying ({whose} failure: {attempt.reason})")
        if state.state in ("succeeded", "failed"):
            self._ended = True  # the line waits for the look's end (`looked`), as every start does

    def looked(self) -> None:
        """The runner's look is over (its ends judged, its starts made): a line if a shard ended."""
        ended, self._ended = self._ended, False
        self.tick(force=ended)

    def counts(self) -> dict[str, int]:
        found = {"queued": 0, "starting": 0, "running": 0, "retrying": 0, "succeeded": 0, "failed": 0}
        for s in self.states:
            key = s.state
            if key == "running" and (s.current is None or s.current.running is None):
                key = "starting"
            found[key] = found.get(key, 0) + 1
        return found

    def gpu_seconds(self) -> float:
        """So far, never less than a line already said: a running attempt counts to now, and its
        end, once known from the platform, may come a moment before the look that said it (the
        document's figure is the measured one)."""
        with self._lock:
            self._said_gpu_s = max(self._said_gpu_s, sum(s.gpu_seconds for s in self.states))
            return self._said_gpu_s

    def line(self, width: int | None = None) -> str:
        """The counts, then GPU-seconds, cost and ETA. On a terminal narrower than the whole line, the
        counts that are 0 go first, then the money and the ETA move to the front, so what a person
        watches for is never what the terminal cuts off."""
        c = self.counts()
        gpu_s = self.gpu_seconds()
        done = c["succeeded"] + c["failed"]
        elapsed = time.monotonic() - self.began
        eta = "?"
        if done:
            eta = f"{max(0.0, elapsed / done * (len(self.states) - done)):.0f}s"
        money = f"{gpu_seconds_text(gpu_s)} ≈ {usd_text(gpu_s * self.usd_per_s)}"
        names = ("queued", "starting", "running", "retrying", "succeeded", "failed")
        counts = " · ".join(f"{k} {c[k]}" for k in names)
        full = f"shards {len(self.states)}: {counts} | {money} | ETA {eta}"
        if width is None or len(full) <= width:
            return full
        counts = " · ".join(f"{k} {c[k]}" for k in names if c[k]) or "none yet"
        short = f"shards {len(self.states)}: {counts} | {money} | ETA {eta}"
        if len(short) <= width:
            return short
        first = f"ETA {eta} | {money} | shards {len(self.states)}: {counts}"
        return first if len(first) <= width else first[: max(1, width - 1)] + "…"

    def tick(self, *, force: bool = False) -> None:
        if not self.live or not self.states:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        if force and now - self._last < 0.5:
            return
        self._last = now
        self.print_line("stderr", self.line(terminal_width(self._err()) if self.terminal else None))
