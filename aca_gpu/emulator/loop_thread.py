"""Start and stop an asyncio loop that serves on its own daemon thread (the emulator and the replay).

Both servers run their aiohttp app on a private loop so that the caller's thread stays free; the
start waits until the loop has either come up or failed, and the stop ends the loop from outside.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable


def start_loop_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """Run `target` on a daemon thread; the caller keeps it (for the stop) before waiting on it."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def stop_loop_thread(loop: asyncio.AbstractEventLoop | None, thread: threading.Thread | None) -> None:
    """Stop a running loop from another thread and wait (10 s at most) for its thread to clean up.

    The loop's own state decides, not only `thread.is_alive()`: a `join` that a signal interrupted
    (SIGTERM raised as KeyboardInterrupt in `serve_forever`) leaves the thread marked stopped while
    its loop still runs, and the cleanup (child processes such as Azurite) would be skipped."""
    if loop is None or thread is None or loop.is_closed():
        return
    if thread.is_alive() or loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        ends = time.monotonic() + 10
        while not loop.is_closed() and time.monotonic() < ends:
            time.sleep(0.02)
