"""The fan-out's live line as a person watching reads it: on a narrow terminal it keeps the money
and the ETA, and its GPU-seconds never go down from one line to the next."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from aca_gpu.workflow.fanout.live import Board


def _board(states: list[Any]) -> Board:
    board = Board(len(states), live=True, logs="all", stdout=io.StringIO, stderr=io.StringIO,
                  usd_per_gpu_s=0.000433, terminal=True)  # fmt: skip
    board.states = states
    return board


def _shard(state: str, gpu_s: float) -> Any:
    return SimpleNamespace(state=state, gpu_seconds=gpu_s, current=SimpleNamespace(running=1.0))


def test_a_narrow_terminal_keeps_the_cost_and_the_eta() -> None:
    board = _board([_shard("running", 10.0)] * 4 + [_shard("succeeded", 5.0)] * 9 + [_shard("queued", 0)] * 7)
    wide = board.line(200)
    assert "retrying 0" in wide and wide.endswith("s") and "≈ $" in wide  # everything, in order
    for width in (120, 100, 80, 60):
        line = board.line(width)
        assert len(line) <= width, (width, line)
        assert "≈ $" in line and "ETA " in line, (width, line)
    assert board.line(100).startswith("shards 20: queued 7 · running 4 · succeeded 9 |")  # zeros left out


def test_gpu_seconds_said_never_go_down_between_lines() -> None:
    shard = _shard("running", 20.0)
    board = _board([shard])
    assert "20 GPU-seconds" in board.line(200)
    shard.gpu_seconds, shard.state = 19.0, "succeeded"  # its end, from the platform: a moment earlier
    assert "20 GPU-seconds" in board.line(200), board.line(200)
