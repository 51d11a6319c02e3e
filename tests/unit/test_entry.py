"""A Ctrl-C while the CLI is still loading ends in one line and exit 130, with a JSON document on request."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aca_gpu import entry


class _Interrupted:
    """Stands in for aca_gpu.cli while Python is loading it when Ctrl-C arrives."""

    def __getattr__(self, name: str) -> Any:
        raise KeyboardInterrupt


@pytest.fixture
def sigint_kept() -> Iterator[None]:
    """The report ignores a second Ctrl-C (the process ends right after): not this test process."""
    import signal

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # main() sets both
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.usefixtures("sigint_kept")
def test_ctrl_c_during_startup(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], json_mode: bool
) -> None:
    monkeypatch.setitem(sys.modules, "aca_gpu.cli", _Interrupted())
    argv = ["acagpu", "up", "--yes", *(["-o", "json"] if json_mode else [])]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 130
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"error: {entry.MESSAGE}"]
    if json_mode:
        doc = json.loads(out)
        assert (doc["schema"], doc["command"], doc["error"]["exit_code"]) == (1, "up", 130)
    else:
        assert out == ""


FINALIZER_SCRIPT = """
import gc, signal, sys, time
from aca_gpu import entry

sys.unraisablehook = entry._lost_interrupt
if sys.argv[1] == "engine":  # the run engine's handler is installed: it already counted the press
    signal.signal(signal.SIGINT, lambda *a: None)
else:  # Python's own handler, as a terminal starts acagpu (a background job inherits SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Socketish:
    def __del__(self):
        raise KeyboardInterrupt  # what a Ctrl-C inside a finalizer looks like


try:
    Socketish()
    gc.collect()
    # the run goes on; a press it kept arrives well before this ends (redelivered 0.05 s after the
    # finalizer; a busy machine may take longer to run that timer)
    for _ in range(20 if sys.argv[1] == "engine" else 100):
        time.sleep(0.1)
    print("carried on")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize(("handler", "expected"), [("default", "interrupted"), ("engine", "carried on")])
def test_a_ctrl_c_swallowed_by_a_finalizer_is_not_lost(handler: str, expected: str) -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", FINALIZER_SCRIPT, handler], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.strip() == expected, proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# sitecustomize for the test below: every import of aca_gpu.entry is held (as on a busy machine's slow
# start), each hold written to HELD_MARK first, so the test can press Ctrl-C inside the first and then
# inside the second (`__main__` loads the entry point again to report the first press)
HELD_ENTRY = """
import importlib.abc, os, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal starts it, whatever came in


class Held(importlib.abc.MetaPathFinder):
    asked = 0

    def find_spec(self, name, path, target=None):
        if name == "aca_gpu.entry":
            Held.asked += 1
            with open(os.environ["HELD_MARK"], "a") as fh:
                fh.write(f"{Held.asked}\\n")
            time.sleep(30 if Held.asked == 1 else 2)
        return None


sys.meta_path.insert(0, Held())
"""


def test_a_second_ctrl_c_while_the_first_is_reported_still_ends_in_one_line(tmp_path: Path) -> None:
    """Beside a second suite, a Ctrl-C 1.2 s after `python -m aca_gpu run` started landed while the
    entry point was still loading, and the second, 1.1 s later, while `__main__` loaded it again to
    say so: a KeyboardInterrupt traceback and exit -2. The first press decides (nothing was done);
    a second one changes nothing."""
    import os
    import signal
    import subprocess
    import time

    (tmp_path / "sitecustomize.py").write_text(HELD_ENTRY, encoding="utf-8")
    mark = tmp_path / "held"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    env |= {"PYTHONPATH": str(tmp_path), "HELD_MARK": str(mark)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aca_gpu", "up", "--yes", "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for holds in (1, 2):
            deadline = time.monotonic() + 60
            while (
                time.monotonic() < deadline
                and proc.poll() is None
                and (not mark.exists() or len(mark.read_text(encoding="utf-8").split()) < holds)
            ):
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert mark.read_text(encoding="utf-8").split() == ["1", "2"], err  # both presses landed in a hold
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [f"error: {entry.MESSAGE}"], err
    doc = json.loads(out)
    assert (doc["command"], doc["error"]["exit_code"]) == ("up", 130)


HELD_EXIT = """
import sys, threading, time
import aca_gpu.cli

def command(argv=None):
    # a command that reported (its document is out) while a thread it started still waits: Python
    # joins it before the process can end
    threading.Thread(target=time.sleep, args=(120,), name="still-waiting").start()
    print('{"exit_code": 130}', flush=True)
    raise SystemExit(130)

aca_gpu.cli.main = command
from aca_gpu.entry import main
main()
"""


def test_a_ctrl_c_after_the_document_ends_the_process_at_once_with_its_code() -> None:
    """A run interrupted under a 429 storm printed its exit-130 document and then waited for a
    start's thread, and a second Ctrl-C was ignored. A press after the document ends the process
    at once, with the code the document gave."""
    import os
    import signal
    import subprocess
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_EXIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"exit_code": 130}
        time.sleep(0.3)  # the command has returned: Python waits for the thread
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert out == "" and "Traceback" not in err, (out, err)
