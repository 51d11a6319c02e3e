"""No command waits silently: each one runs, as a real process without a terminal, against a state
where it must wait, and its stderr is watched line by line as it arrives, from the moment it starts.

The rule is "nothing printed for more than 10 s" at the default progress period (8 s); here the
period is `PROGRESS_S` and the bound `SILENCE_S`, so the waits can be a few seconds long. What makes
each command wait: a replica that never starts (up, validate, smi, exec, test), a registry that holds
its connection (validate), environment deletes twice as slow as usual (down, env delete, reap), a
GPU profile added to a warm environment (env create), ARM throttling the guard's writes (guard
install), a container that sleeps (run). The commands run side by side to keep the test quick;
each starts once the one before it has spoken, so that the interpreters' start-ups (a second of CPU
each) do not all fall on the same cores at once.

Silence is judged on what the command controls: a stretch of wall time counts as silent only for
the part its process spent neither on a CPU nor waiting for one (Linux's per-thread schedstat), and
the part the line spent waiting for its reader's CPU does not count either. Each line is stamped on
arrival by a process of its own (stamp_lines.py), not by a thread of this one: this process runs the
emulator too, and a reader thread waiting for its GIL had lines written on time arrive in a burst
seconds later, read as seconds of silence.
On a busy machine a start-up that waits for the CPU is slow, not silent; a command that blocks on
the network without a word is silent however idle the machine is.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aca_gpu import naming
from aca_gpu.cli import cli
from aca_gpu.config import load_settings
from aca_gpu.models import EnvSpec
from aca_gpu.workflow.base.context import open_cloud

PROGRESS_S = 0.3
SILENCE_S = 2.0
WAIT = "2s"  # --start-timeout of the waits that never end (a stuck replica)
WAITED_S = 3.0  # each new state holds its command at least this long, so a silent one shows
REGISTRY_HOLD_S = 3.0  # the registry's silence before it drops the connection
ACAGPU = [sys.executable, "-m", "aca_gpu"]
STAMPER = Path(__file__).with_name("stamp_lines.py")
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SLOW = (
    "stuck;"  # every replica that starts from now on stays unplaced
    "slow_delete:factor=2;"  # an environment delete: 2 x 540 emulated s
    "slow_create:match=env-lab,factor=2;"  # a GPU profile added to warm environment lab: 2 x 490 s
    "429:match=rg-acagpu-guard,method=PUT,count=2,retry_after=2"  # the guard's group: 2 x 2 s
)


@dataclass
class Watched:
    args: tuple[str, ...]
    proc: subprocess.Popen[str]
    began: float = field(default_factory=time.monotonic)
    # (when the line arrived, the line, the process's busy seconds then, the reader's CPU wait then)
    lines: list[tuple[float, str, float, float]] = field(default_factory=list)
    stdout: str = ""
    ended: float = 0.0
    spoke: threading.Event = field(default_factory=threading.Event)  # a first line, or the end
    first: tuple[float, float, float] | None = None  # (when the command started, busy, held)

    def read(self) -> None:
        """The stamper's records (stamp_lines.py): when each line arrived, and the figures then."""
        assert self.proc.stderr is not None and self.proc.stdout is not None
        out = threading.Thread(target=lambda: setattr(self, "stdout", self.proc.stdout.read()))  # type: ignore[union-attr]
        out.start()
        for record in self.proc.stderr:
            at, busy, held, line = record.rstrip("\n").split("\t", 3)
            if self.first is None:
                self.first = (float(at), float(busy), float(held))
                continue
            self.lines.append((float(at), line, float(busy), float(held)))
            self.spoke.set()
        self.spoke.set()
        out.join()
        self.proc.wait()
        self.ended = time.monotonic()

    def timed(self) -> str:
        rows = [f"{t - self.began:6.2f} {busy:5.2f} {text[:104]}" for t, text, busy, _ in self.lines]
        return (
            "  wall  busy\n"
            + "\n".join(rows)
            + f"\n{self.ended - self.began:6.2f} (exit {self.proc.returncode})"
        )

    @property
    def stderr(self) -> str:
        return "\n".join(line[1] for line in self.lines)

    def silence(self) -> str | None:
        """What is wrong with its stderr: nothing said about a wait, or a quiet stretch longer than
        SILENCE_S from the process's start to its last line, less the time it was busy or held back
        by the machine (the time before the first line counts like any other; the interpreter's own
        exit is no wait)."""
        if not any(text.startswith("... waiting for") for _, text, *_ in self.lines):
            return "never said what it waits for"
        stamps = [self.first or (self.began, 0.0, 0.0), *((t, b, h) for t, _, b, h in self.lines)]
        quiet = [(b[0] - a[0]) - (b[1] - a[1]) - (b[2] - a[2]) for a, b in itertools.pairwise(stamps)]
        longest = max(quiet)
        return f"silent for {longest:.1f}s of wall time it was not busy" if longest > SILENCE_S else None


def _watch(argv: list[str], env: dict[str, str] | None = None) -> Watched:
    proc = subprocess.Popen(
        [sys.executable, str(STAMPER), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the stamper and its command: one group to kill
    )
    watched = Watched(tuple(argv), proc)
    threading.Thread(target=watched.read, daemon=True).start()
    return watched


def test_the_judge_tells_a_silent_wait_from_a_busy_one() -> None:
    """3 s asleep before the first line is a silent wait; 3 s of CPU before it (a start-up on a
    loaded machine looks the same from outside) is not."""
    say = "import sys; print('... waiting for x', file=sys.stderr)"
    asleep = _watch([sys.executable, "-c", f"import time; time.sleep(3); {say}"])
    spinning = _watch(
        [
            sys.executable,
            "-c",
            f"import time\nend = time.process_time() + 3\nwhile time.process_time() < end: pass\n{say}",
        ]
    )
    _finish(asleep)
    _finish(spinning)
    assert (asleep.silence() or "").startswith("silent for"), asleep.timed()
    assert spinning.silence() is None, spinning.timed()


def _start(*args: str, env: dict[str, str]) -> Watched:
    return _watch([*ACAGPU, *args], env)


def _finish(watched: Watched, timeout: float = 120.0) -> Watched:
    end = time.monotonic() + timeout
    while not watched.ended and time.monotonic() < end:
        time.sleep(0.05)
    if not watched.ended:
        _kill([watched])
        raise AssertionError(f"{watched.args} still waiting after {timeout:.0f}s:\n{watched.stderr}")
    return watched


def test_every_waiting_command_says_what_it_waits_for(emu: Any) -> None:
    result = CliRunner().invoke(cli, ["up", "--yes", "--keep", "--run-id", "k2", "--max-minutes", "30"])
    assert result.exit_code == 0, result.stderr
    _groups_to_wait_on()
    # eleven processes poll side by side: every 0.1 s leaves the CPU to their start-ups and progress
    env = {**os.environ, "ACAGPU_PROGRESS_S": str(PROGRESS_S), "ACAGPU_POLLING_INTERVAL": "0.1"}
    env.pop("ACAGPU_EMULATOR_FAULTS", None)
    emu.set_faults(SLOW)

    # a stopped explorer has no console stream: logs answers at once, whatever the format (before
    # smi and exec wake it); in this process, on a thread that must be done in 10 s
    for fmt in ([], ["-o", "json"]):
        code, out, err = _in_time(["logs", "--run-id", "k2", "--tail", "5", *fmt])
        assert code == 2 and "stopped" in err and "--system" in err, err
    assert json.loads(out)["error"]["code"] == "ExplorerStopped"
    with _silent_registry() as registry:
        stuck = f"--start-timeout {WAIT} -o json"  # a replica that never starts: its deadline, exit 4
        commands = {
            # the registry holds validate's image read, then its replica never starts
            "validate": f"validate --image {registry}/{IMAGE} --gpu t4 --yes --run-id v1 {stuck}",
            "run": f"run --emulator --time-scale 0.005 -o json {IMAGE} -- sh -c 'sleep 4'",
            "up": f"up --yes --run-id u3 --max-minutes 1 {stuck}",
            "smi": f"smi --run-id k2 {stuck}",
            "exec": f"exec --run-id k2 --start-timeout {WAIT} -- true",
            "test": f"test --run-id k2 --timeout 1s {stuck}",
            "down": "down --run-id d1 --yes -o json",
            "env create": "env create lab --gpu t4,a100 --yes -o json",
            "env delete": "env delete old --wait --yes -o json",
            "reap": "reap --yes -o json",
            "guard install": "guard install -l eastus --yes -o json",
        }
        waits: dict[str, Watched] = {}
        try:
            for name, args in commands.items():
                waits[name] = _start(*shlex.split(args), env=env)
                # the next one starts once this one has spoken: start-ups, CPU-bound, one at a time
                waits[name].spoke.wait(SILENCE_S)
            _judge(waits)
        finally:
            _kill(list(waits.values()))

    emu.set_faults("")
    assert CliRunner().invoke(cli, ["down", "--run-id", "k2", "--yes", "--no-wait"]).exit_code == 0


def _groups_to_wait_on() -> None:
    """Groups with an environment each, made straight through the cloud adapter: a warm environment
    to grow (lab) and one to delete (old), a run to take down (d1), two expired runs to reap."""
    cloud = open_cloud(load_settings())
    day = timedelta(days=1)
    ago = datetime.now(UTC) - 2 * day
    warm = [naming.EnvNames(n) for n in ("lab", "old")]
    runs = [(naming.RunNames(r), now) for r, now in (("d1", None), ("r1", ago), ("r2", ago))]
    made = [
        (w.resource_group, w.environment, naming.env_tags(w.name, owner="t", idle_ttl=day, gpus="t4"))
        for w in warm
    ]
    made += [
        (r.resource_group, r.environment, naming.run_tags(r.run_id, owner="t", ttl=day, now=now))
        for r, now in runs
    ]

    def make(group: str, environment: str, tags: dict[str, str]) -> None:
        cloud.create_resource_group(group, "eastus", tags)
        spec = EnvSpec(group, environment, "eastus", tags, "gpu-t4", "Consumption-GPU-NC8as-T4")
        cloud.create_environment(spec)

    with ThreadPoolExecutor(len(made)) as pool:
        list(pool.map(lambda args: make(*args), made))


@contextmanager
def _silent_registry() -> Iterator[str]:
    """`127.0.0.1:PORT`: a registry that accepts each connection, says nothing, and drops it after
    REGISTRY_HOLD_S (a slow or filtered registry; a read gives up only at its timeout, 30 s)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    held: list[tuple[float, socket.socket]] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            with suppress(TimeoutError):
                held.append((time.monotonic(), listener.accept()[0]))
            for since, conn in [h for h in held if time.monotonic() - h[0] > REGISTRY_HOLD_S]:
                held.remove((since, conn))
                conn.close()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        server.join()
        for _, conn in held:
            conn.close()
        listener.close()


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
    from aca_gpu.workflow.engine.plan import UpRequest, make_plan

    plan = make_plan(Settings(), UpRequest(start_timeout="15m", run_id="s1"), owner="me")
    assert emulated_plan(plan, 0.02).start_timeout_s == 18.0
    assert emulated_plan(plan, 0.0001).start_timeout_s == MIN_EMULATED_START_S
    assert plan.start_timeout_s == 900.0  # Azure's own deadline is untouched


def _kill(watched: list[Watched]) -> None:
    for one in watched:
        with suppress(ProcessLookupError):
            os.killpg(one.proc.pid, signal.SIGKILL)


def _judge(waits: dict[str, Watched]) -> None:
    for watched in waits.values():
        _finish(watched)
    silent = [f"{n} {w.silence()}:\n{w.timed()}" for n, w in waits.items() if w.silence()]
    assert not silent, "\n".join(silent)
    # the deadline: exit 4 for the waits that never end; the others end well
    codes = dict.fromkeys(("up", "smi", "exec", "test", "validate"), 4)
    for name, watched in waits.items():
        assert watched.proc.returncode == codes.get(name, 0), (name, watched.timed())
        # the state held it long enough for silence to show
        assert name in codes or watched.ended - watched.began >= WAITED_S, (name, watched.timed())
    # whichever of the two came first woke the stopped explorer, and said so
    assert "waiting for wake explorer" in waits["smi"].stderr + waits["exec"].stderr
    assert "waiting for image registry" in waits["validate"].stderr
    assert "waiting for resource group rg-acagpu-guard" in waits["guard install"].stderr
    assert json.loads(waits["env create"].stdout)["profiles"][-1]["type"] == "Consumption-GPU-NC24-A100"
