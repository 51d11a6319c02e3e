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
