"""A terminal shows one spinner at a time: a step inside a step (preflight's checks, a fan-out's
parallel clamp) drew its spinner on the same line as the outer one's, `⠋ waiting for preflight
0:00:00⠋ waiting for GPU quota 0:00:00`; the outer one now pauses and comes back after."""

from __future__ import annotations

import os
import re
import threading
import time

from aca_gpu.output import Output


def test_a_step_inside_a_step_never_draws_two_spinners_on_one_line() -> None:
    master, slave = os.openpty()
    os.set_blocking(master, False)
    chunks: list[bytes] = []
    done = threading.Event()

    def drain() -> None:  # a pty's buffer is small: read while the spinners draw
        while not done.is_set():
            try:
                chunks.append(os.read(master, 65536))
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        with os.fdopen(os.dup(slave), "w") as stream:
            output = Output("table", stderr=stream, stdout=stream)
            assert output.interactive
            with output.step("outer wait"):
                time.sleep(0.12)
                for inner in ("first check", "second check"):
                    with output.step(inner):
                        time.sleep(0.12)
                time.sleep(0.12)
    finally:
        time.sleep(0.1)
        done.set()
        reader.join(5)
        os.close(master)
        os.close(slave)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    frames = [f for f in re.split(r"[\r\n]", text) if f.strip()]
    assert [f for f in frames if f.count("waiting for") > 1] == [], frames
    assert any("waiting for first check" in f for f in frames), frames
    # the outer wait is said again between and after its inner steps
    order = [f.split("waiting for ")[1].split(" 0:")[0] if "waiting for" in f else f[:14] for f in frames]
    last_inner = max(i for i, f in enumerate(order) if f.startswith("✓ second check"))
    assert "outer wait" in order[last_inner:], order
    assert order[-1].startswith("✓ outer wait"), order
