"""The console entry point: a Ctrl-C that lands while Python is still loading the CLI ends like any
other (one line, exit 130, a JSON document with `-o json`), never in a traceback. SIGTERM is
treated as Ctrl-C.

A Ctrl-C can also land while a finalizer runs (an SSL socket's `__del__`, a weakref callback):
Python then prints "Exception ignored ... KeyboardInterrupt" and carries on as if nothing was
pressed. `_lost_interrupt` keeps that press: it is delivered again at the main thread's next safe
point, or, under the run engine's handler (which already counted it and cancelled the waits), left
to the engine, which treats the run as interrupted.
"""

from __future__ import annotations

import _thread
import contextlib
import itertools
import json
import os
import signal
import sys
from typing import Any

MESSAGE = "interrupted (Ctrl-C) while acagpu was starting; nothing was done"


def _wants_json(argv: list[str]) -> bool:
    return any(a in ("-ojson", "--output=json") for a in argv) or any(
        a in ("-o", "--output") and b == "json" for a, b in itertools.pairwise(argv)
    )


_REDELIVERY = {"pending": False, "done": False}


def _redeliver() -> None:
    _REDELIVERY["pending"] = False
    if not _REDELIVERY["done"]:  # the command has ended (exit 130 on its way): nothing to stop
        _thread.interrupt_main()


def _lost_interrupt(unraisable: Any) -> None:
    if isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, KeyboardInterrupt):
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler and not _REDELIVERY["pending"]:
            # raised again once this hook and the finalizer have returned (from here it would be
            # swallowed again), where the CLI catches it: exit 130. One press is delivered once,
            # however many finalizers it passed through, and never after the command ended (an
            # interrupt during the interpreter's exit would end it by the signal, exit -2).
            import threading

            _REDELIVERY["pending"] = True
            threading.Timer(0.05, _redeliver).start()
        return
    sys.__unraisablehook__(unraisable)


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM (a cancelled CI job, `timeout`) is a Ctrl-C: tear down, exit 130, clean up."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _terminated:
        handler(signal.SIGINT, frame)  # the run engine's own handler when a run is under way
        return
    raise KeyboardInterrupt


def interrupted_while_starting() -> None:
    """Ctrl-C before any command ran: one line (and the JSON document with `-o json`), exit 130.
    Nothing was done, so a second Ctrl-C has nothing to change: it is ignored while this reports."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    argv = sys.argv[1:]
    if _wants_json(argv):
        command = next((a for a in argv if not a.startswith("-")), "")
        error = {"message": MESSAGE, "code": "Interrupted", "exit_code": 130, "hint": None}
        print(json.dumps({"schema": 1, "command": command, "status": "error", "error": error}))
    print(f"error: {MESSAGE}", file=sys.stderr)
    raise SystemExit(130) from None


def main() -> None:
    sys.unraisablehook = _lost_interrupt
    signal.signal(signal.SIGTERM, _terminated)
    try:
        from aca_gpu.cli import main as cli_main
    except KeyboardInterrupt:
        interrupted_while_starting()
    code: object = 0
    try:
        cli_main()
    except SystemExit as exc:
        code = exc.code
        raise
    except KeyboardInterrupt:  # outside the command's own handling (its first or last moments)
        print("error: interrupted", file=sys.stderr, flush=True)
        code = 130
        raise SystemExit(130) from None
    finally:
        _REDELIVERY["done"] = True
        # the command has reported and set its exit code: a Ctrl-C during the interpreter's exit
        # (Python's own handler is gone by then) would end it by the signal (-2) instead, and one
        # ignored would leave a shutdown that waits on a thread with no way out. A press from here
        # on ends the process at once, with the code the command reported.
        signal.signal(signal.SIGINT, lambda signum, frame: _leave_now(code))


def _leave_now(code: object) -> None:
    """Exit with the command's own code now, not after the threads Python would still wait for
    (its document and last line are already out: flushed, never repeated)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more can reach it
            stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))
