"""Daemon-thread futures: after Ctrl-C, a call stuck in a socket must not keep the process alive.

`concurrent.futures.ThreadPoolExecutor` joins its (non-daemon) workers at interpreter exit, so a
hung HTTP call would hold the prompt; these threads are abandoned instead, and every wait on them
is sliced so a signal handler in the main thread runs promptly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")


def spawn(call: Callable[[], T], name: str) -> Future[T]:
    """Run `call` in a daemon thread and return its future."""
    future: Future[T] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(call())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=target, daemon=True, name=name).start()
    return future


def wait_for(future: Future[T]) -> T:
    """The future's result, waited for in short slices so a signal handler can run between them."""
    while True:
        try:
            return future.result(timeout=0.25)
        except FutureTimeout:
            continue
