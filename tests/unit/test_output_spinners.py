"""One live display per terminal: steps waiting at once (a nested step, a pair's steps in their
threads) are rows of one display, never two spinners redrawing the same line over each other.

The stream is played through a small terminal model (carriage return, newline, erase line, cursor
up, colours ignored), so what is checked is what a terminal shows, frame by frame."""

from __future__ import annotations

import io
import re
import threading
import time

from aca_gpu.output import Output

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def frames(text: str) -> list[list[str]]:
    """The screen's rows after every carriage return (where rich begins a redraw) and at the end."""
    rows, row, col, shots, at = [""], 0, 0, [], 0

    def put(ch: str) -> None:
        nonlocal col
        line = rows[row].ljust(col)
        rows[row] = line[:col] + ch + line[col + 1 :]
        col += 1

    while at < len(text):
        match = _CSI.match(text, at)
        if match:
            arg, code = match.groups()
            if code == "K":
                rows[row] = ""
            elif code == "A":
                row = max(0, row - int(arg or 1))
            at = match.end()
            continue
        ch = text[at]
        at += 1
        if ch == "\r":
            shots.append(list(rows))
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append("")
        else:
            put(ch)
    return [*shots, rows]


def _waits(rows: list[str]) -> list[list[str]]:
    return [re.findall(r"waiting for (\w+)", r) for r in rows]


def test_a_nested_step_is_a_row_of_its_own_not_a_second_spinner_on_the_line() -> None:
    err = _Tty()
    out = Output("table", stderr=err, stdout=io.StringIO(), github=False)
    with out.step("outer"):
        time.sleep(0.25)
        with out.step("inner"):
            time.sleep(0.35)
            out.warn("a line printed while both wait")
        time.sleep(0.15)
    shots = frames(err.getvalue())
    assert all(len(found) <= 1 for rows in shots for found in _waits(rows)), "two spinners on one line"
    both = [rows for rows in shots if [w for found in _waits(rows) for w in found] == ["outer", "inner"]]
    assert both, "the two waits were never shown together, one row each"
    final = [r.strip() for r in shots[-1] if r.strip()]
    assert final[0] == "warning: a line printed while both wait"
    assert final[1].startswith("✓ inner") and final[2].startswith("✓ outer") and len(final) == 3


def test_steps_of_two_threads_share_the_display() -> None:
    err = _Tty()
    out = Output("table", stderr=err, stdout=io.StringIO(), github=False)
    gate = threading.Barrier(2)

    def step(name: str) -> None:
        with out.step(name):
            gate.wait(timeout=5)
            time.sleep(0.35)

    threads = [threading.Thread(target=step, args=(n,)) for n in ("probe", "tester")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    shots = frames(err.getvalue())
    assert all(len(found) <= 1 for rows in shots for found in _waits(rows))
    assert any(sorted(w for f in _waits(rows) for w in f) == ["probe", "tester"] for rows in shots)
    assert sorted(r.split()[1] for r in shots[-1] if r.strip()) == ["probe", "tester"]
