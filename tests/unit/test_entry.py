"""A Ctrl-C while the CLI is still loading ends in one line and exit 130, with a JSON document on request."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from aca_gpu import entry


class _Interrupted:
    """Stands in for aca_gpu.cli while Python is loading it when Ctrl-C arrives."""

    def __getattr__(self, name: str) -> Any:
        raise KeyboardInterrupt


@pytest.mark.parametrize("json_mode", [False, True])
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
