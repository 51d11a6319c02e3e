"""The one live display of a terminal: every step waiting at once is a row of it.

Steps can wait at the same time (a nested step, the steps a pair's probe and tester take in their
threads). A live display of each, started side by side, would each redraw the same terminal line
over the other (two spinners on one line); one display with a row per wait keeps every wait in
view, and a line printed while it is up (a finished step, a warning) goes above its rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TextIO


class LiveRows:
    """The one live display of an Output's terminal. Every step waiting at once is a row of it (a
    nested step, a pair's steps in their threads): two displays started side by side would each
    redraw the same terminal line over the other. Lines printed while it is up go above it."""

    def __init__(self, stream: Callable[[], TextIO]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._bar: Any = None
        self._rows = 0

    def start(self, label: str) -> Callable[[], None]:
        """A row saying `label` with its elapsed time; the returned call removes it (and the
        display with its last row)."""
        from rich.console import Console
        from rich.progress import Progress as RichProgress
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        with self._lock:
            if self._bar is None:
                self._bar = RichProgress(
                    SpinnerColumn(),
                    TextColumn("{task.description}"),
                    TimeElapsedColumn(),
                    console=Console(file=self._stream()),
                    transient=True,
                )
                self._bar.start()
            bar = self._bar
            task = bar.add_task(label, total=None)
            self._rows += 1

        def stop() -> None:
            with self._lock:
                bar.remove_task(task)
                self._rows -= 1
                if self._rows == 0 and self._bar is bar:
                    bar.stop()
                    self._bar = None
                else:
                    bar.refresh()  # its row goes now, not at the next tick

        return stop

    def print(self, line: str) -> None:
        """`line` on the stream, above the live rows while they are up."""
        with self._lock:
            bar = self._bar
            if bar is None:
                print(line, file=self._stream(), flush=True)
                return
            bar.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
