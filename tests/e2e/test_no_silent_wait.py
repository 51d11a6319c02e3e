"""No command waits silently: each one runs, as a real process without a terminal, against a state
where it must wait, and its stderr is watched line by line as it arrives.

The rule is "nothing printed for more than 10 s" at the default progress period (8 s); here the
period is `PROGRESS_S` and the bound `SILENCE_S`, so the waits can be a few seconds long. The
commands run side by side to keep the test quick.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli

PROGRESS_S = 0.3
SILENCE_S = 2.0
WAIT = "2s"  # --start-timeout of the waits that never end (a stuck replica)
ACAGPU = [sys.executable, "-m", "aca_gpu"]


@dataclass
class Watched:
    args: tuple[str, ...]
    proc: subprocess.Popen[str]
    began: float = field(default_factory=time.monotonic)
    lines: list[tuple[float, str]] = field(default_factory=list)
    stdout: str = ""
    ended: float = 0.0

    def read(self) -> None:
        assert self.proc.stderr is not None and self.proc.stdout is not None
        out = threading.Thread(target=lambda: setattr(self, "stdout", self.proc.stdout.read()))  # type: ignore[union-attr]
        out.start()
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
        out.join()
        self.proc.wait()
        self.ended = time.monotonic()

    def timed(self) -> str:
        return "\n".join(f"{t - self.began:6.2f} {text[:110]}" for t, text in self.lines) + (
            f"\n{self.ended - self.began:6.2f} (exit {self.proc.returncode})"
        )

    @property
    def stderr(self) -> str:
        return "\n".join(text for _, text in self.lines)

    def longest_silence(self) -> float:
        """From the first line saying what it waits for to the last line, the longest quiet stretch."""
        times = [t for t, text in self.lines]
        first = next((t for t, text in self.lines if text.startswith("... waiting for")), None)
        assert first is not None, f"{self.args}: never said what it waits for:\n{self.stderr}"
        stamps = [t for t in times if t >= first]  # (the interpreter's own exit is no wait)
        return max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)


def _start(*args: str, env: dict[str, str]) -> Watched:
    proc = subprocess.Popen(
        [*ACAGPU, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    watched = Watched(args, proc)
    threading.Thread(target=watched.read, daemon=True).start()
    return watched


def _finish(watched: Watched, timeout: float = 60.0) -> Watched:
    end = time.monotonic() + timeout
    while not watched.ended and time.monotonic() < end:
        time.sleep(0.05)
    if not watched.ended:
        watched.proc.kill()
        raise AssertionError(f"{watched.args} still waiting after {timeout:.0f}s:\n{watched.stderr}")
    return watched


def test_every_waiting_command_says_what_it_waits_for(emu: Any) -> None:
    result = CliRunner().invoke(cli, ["up", "--yes", "--keep", "--run-id", "k2", "--max-minutes", "5"])
    assert result.exit_code == 0, result.stderr
    env = {**os.environ, "ACAGPU_PROGRESS_S": str(PROGRESS_S)}
    env.pop("ACAGPU_EMULATOR_FAULTS", None)
    emu.set_faults("stuck")  # every replica that starts from now on stays unplaced

    # a stopped explorer has no console stream: logs answers at once, whatever the format (before
    # smi and exec wake it); in this process, on a thread that must be done in 10 s
    for fmt in ([], ["-o", "json"]):
        code, out, err = _in_time(["logs", "--run-id", "k2", "--tail", "5", *fmt])
        assert code == 2 and "stopped" in err and "--system" in err, err
    assert json.loads(out)["error"]["code"] == "ExplorerStopped"
    waits = {
        "up": _start(
            "up",
            "--yes",
            "--run-id",
            "u3",
            "--start-timeout",
            WAIT,
            "--max-minutes",
            "1",
            "-o",
            "json",
            env=env,
        ),
        "smi": _start("smi", "--run-id", "k2", "--start-timeout", WAIT, "-o", "json", env=env),
        "exec": _start("exec", "--run-id", "k2", "--start-timeout", WAIT, "--", "true", env=env),
        "test": _start(
            "test", "--run-id", "k2", "--start-timeout", WAIT, "--timeout", "1s", "-o", "json", env=env
        ),
    }
    try:
        _judge(waits)
    finally:
        _kill(list(waits.values()))

    emu.set_faults("")
    assert CliRunner().invoke(cli, ["down", "--run-id", "k2", "--yes"]).exit_code == 0


def _in_time(args: list[str], limit: float = 10.0) -> tuple[int, str, str]:
    """A command run here on a thread; still running after `limit` seconds is a silent wait."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(CliRunner().invoke(cli, args)), daemon=True)
    worker.start()
    worker.join(limit)
    assert done, f"{args} still waiting after {limit:.0f}s"
    return done[0].exit_code, done[0].stdout, done[0].stderr


def test_the_emulator_scales_start_timeout_like_every_duration() -> None:
    """`up --emulator` waited 15 real minutes in a region without capacity: the deadline is on
    the emulator's clock now (10m at 0.002 is 1.2 s, floored at 2 s)."""
    from aca_gpu.cli.runopts import MIN_EMULATED_START_S, emulated_plan
    from aca_gpu.config import Settings
    from aca_gpu.workflow.plan import UpRequest, make_plan

    plan = make_plan(Settings(), UpRequest(start_timeout="15m", run_id="s1"), owner="me")
    assert emulated_plan(plan, 0.02).start_timeout_s == 18.0
    assert emulated_plan(plan, 0.0001).start_timeout_s == MIN_EMULATED_START_S
    assert plan.start_timeout_s == 900.0  # Azure's own deadline is untouched


def _kill(watched: list[Watched]) -> None:
    for one in watched:
        if one.proc.poll() is None:
            one.proc.kill()


def _judge(waits: dict[str, Watched]) -> None:
    for name, watched in waits.items():
        _finish(watched)
        assert watched.longest_silence() <= SILENCE_S, f"{name}:\n{watched.timed()}"
    for name in ("up", "smi", "exec", "test"):
        assert waits[name].proc.returncode == 4, (name, waits[name].stderr)  # the deadline: exit 4
    # whichever of the two came first woke the stopped explorer, and said so
    assert "waiting for wake explorer" in waits["smi"].stderr + waits["exec"].stderr
