"""CPU seconds and import time of real acagpu commands against a running `acagpu emulator serve`.

Every acagpu command is a fresh Python process, and the test suite starts hundreds of them, so what a
command pays before it does anything (importing modules) is paid on every call. For each command this
measures, over --runs fresh processes, the median of:
  cpu      user + sys seconds of the child process (os.wait4): the whole command, in a plain run
  import   CPU seconds spent importing (the thread's own CPU inside each outermost `import` statement
           or importlib.import_module call, summed), in a second run under a small harness
  wall     the same imports' wall seconds (what `python -X importtime` sums, a busy machine's waits
           included)
  modules  how many modules that run had loaded at its end
With --baseline PATH (an older tree: `git archive REV aca_gpu templates | tar -x -C PATH`) each
command runs from both trees in turn (interleaved, so a busy machine weighs on both alike) and the
ratio new/old is printed. Both trees talk to one emulator, served from this tree.

Commands: status, env list, cost, check (all -o json), up --env lab, run --env lab busybox echo hi,
down of a kept run (made beforehand with `up --keep`, not measured).

Usage: python benchmarks/command_startup.py [--runs 5] [--time-scale 0.01] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import DEVNULL

HERE = Path(__file__).resolve().parents[1]
ACAGPU = [sys.executable, "-m", "aca_gpu"]

COMMANDS: dict[str, list[str]] = {
    "status": ["status", "-o", "json"],
    "env list": ["env", "list", "-o", "json"],
    "cost": ["cost", "-o", "json"],
    "check": ["check", "-o", "json"],
    "up --env": ["up", "--env", "lab", "--yes", "-o", "json"],
    "run --env": ["run", "--env", "lab", "--yes", "-o", "json", "busybox", "--", "echo", "hi"],
    "down": ["down", "--yes", "-o", "json", "--run-id"],  # + a kept run's id
}

# Run as `python -c HARNESS ARGS...`: `python -m aca_gpu ARGS`, timing every outermost import.
HARNESS = """
import atexit, builtins, importlib, os, runpy, sys, threading, time
spent = [0.0, 0.0]
local = threading.local()
def timed(real):
    def wrapper(*args, **kwargs):
        if getattr(local, "inside", False):
            return real(*args, **kwargs)
        local.inside = True
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - cpu
            spent[1] += time.perf_counter() - wall
            local.inside = False
    return wrapper
builtins.__import__ = timed(builtins.__import__)
importlib.import_module = timed(importlib.import_module)
def report():
    with open(os.environ["STARTUP_REPORT"], "w") as fh:
        fh.write(f"{spent[0]} {spent[1]} {len(sys.modules)}")
atexit.register(report)
sys.argv = ["acagpu", *sys.argv[1:]]
runpy.run_module("aca_gpu", run_name="__main__", alter_sys=True)
"""


def _start_emulator(workdir: Path, scale: float) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    env_file = workdir / "emulator.env"
    proc = subprocess.Popen(
        [*ACAGPU, "emulator", "serve", "--registered", f"--time-scale={scale}", f"--env-file={env_file}"],
        env=os.environ | {"PYTHONPATH": str(HERE)},
        cwd=workdir,
        stdout=DEVNULL,
        stderr=DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not env_file.exists() or "ACAGPU_SUBSCRIPTION" not in env_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the emulator did not start")
        time.sleep(0.1)
    variables = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            variables[key] = value.strip("'\"")
    return proc, variables


def _child_env(tree: Path, client: dict[str, str], home: Path) -> dict[str, str]:
    # compiled modules are kept (as an installed acagpu has them): an image that sets
    # PYTHONDONTWRITEBYTECODE would have every run compile acagpu's sources again
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    return env | client | {"PYTHONPATH": str(tree), "ACAGPU_POLLING_INTERVAL": "0.02", "HOME": str(home)}


def _setup(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run([*ACAGPU, *argv], env=env, cwd=env["HOME"], check=True, stdout=DEVNULL, stderr=DEVNULL)


def _cpu(argv: list[str], env: dict[str, str]) -> float:
    """user + sys seconds of one child, from the kernel's own accounting of that process."""
    # a child runs in the scratch folder (its HOME), so PYTHONPATH alone says which tree it runs
    errors = Path(env["HOME"]) / "stderr.txt"
    with errors.open("wb") as stderr:
        proc = subprocess.Popen([*ACAGPU, *argv], env=env, cwd=env["HOME"], stdout=DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        last = errors.read_text(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: " + " / ".join(last))
    return usage.ru_utime + usage.ru_stime


def _imports(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, modules) of one run's imports, from the harness."""
    report = Path(env["HOME"]) / "imports.txt"
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, *argv],
        env=env | {"STARTUP_REPORT": str(report)},
        cwd=env["HOME"],
        stdout=DEVNULL,
        stderr=DEVNULL,
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode} under the harness")
    cpu, wall, modules = report.read_text().split()
    return float(cpu), float(wall), int(modules)


def _tail(runs: Iterator[str]) -> list[str]:
    """The next kept run's id for `down`; nothing for the other commands (their iterator is empty)."""
    return [rid for rid in [next(runs, "")] if rid]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--baseline", type=Path, help="an older tree (holding aca_gpu/) to compare with")
    parser.add_argument("--only", action="append", choices=list(COMMANDS), help="measure only these")
    args = parser.parse_args()
    trees = {"new": HERE} | ({"old": args.baseline.resolve()} if args.baseline else {})
    names = args.only or list(COMMANDS)
    cpu: dict[tuple[str, str], list[float]] = {}
    imp: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="acagpu-startup-") as tmp:
        work = Path(tmp)
        emulator, client = _start_emulator(work, args.time_scale)
        try:
            envs = {label: _child_env(tree, client, work) for label, tree in trees.items()}
            _setup(["env", "create", "lab", "--gpu", "t4", "--yes"], envs["new"])
            _setup(["up", "--yes", "--keep", "--run-id", "seen"], envs["new"])  # a kept run for status to see
            for label in trees:  # warm the .pyc files and the page cache: we measure the start, not the disk
                _cpu(["status", "-o", "json"], envs[label])
            for name in names:
                gone = [f"gone{i}" for i in range(2 * args.runs * len(trees))] if name == "down" else []
                for rid in gone:  # the kept runs `down` deletes, made once the commands before it ran
                    _setup(["up", "--yes", "--keep", "--run-id", rid], envs["new"])
                left = iter(gone)
                for _ in range(args.runs):
                    for label in trees:
                        key = (name, label)
                        cpu.setdefault(key, []).append(_cpu(COMMANDS[name] + _tail(left), envs[label]))
                        imp.setdefault(key, []).append(_imports(COMMANDS[name] + _tail(left), envs[label]))
        finally:
            emulator.terminate()
            emulator.wait(timeout=60)
    print(f"median of {args.runs} runs per command and tree; emulator time scale {args.time_scale}")
    header = f"{'command':<10} {'tree':<4} {'cpu s':>7} {'import s':>9} {'wall s':>7} {'modules':>8}"
    print(header + ("   new/old: cpu, import" if args.baseline else ""))
    for name in names:
        figures = {}
        for label in trees:
            c = statistics.median(cpu[(name, label)])
            i = statistics.median(x[0] for x in imp[(name, label)])
            w = statistics.median(x[1] for x in imp[(name, label)])
            m = int(statistics.median(x[2] for x in imp[(name, label)]))
            figures[label] = (c, i)
            print(f"{name:<10} {label:<4} {c:7.3f} {i:9.3f} {w:7.3f} {m:8d}")
        if args.baseline:
            (c_new, i_new), (c_old, i_old) = figures["new"], figures["old"]
            print(f"{'':<48}   {c_new / c_old:.2f}, {i_new / i_old:.2f}")


if __name__ == "__main__":
    main()
