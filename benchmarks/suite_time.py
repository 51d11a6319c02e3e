"""The whole suite's wall time, and the machine's CPU it used and left idle while it ran.

    python benchmarks/suite_time.py [--per-test] [PYTEST ARGS...]   (default: -n 6 --dist worksteal -q)

SUITE_TIME_ROWS=FILE (with --per-test) writes every test's CPU and wall seconds there as JSON.

The suite on a two-core machine is bound by its CPU; idle CPU while it runs means workers waiting on
tests that started late (a long scenario at the end of a worker's share). CPU figures come from
/proc/stat (the whole machine: run it with nothing else busy). `--per-test` adds each test's CPU
(its worker's and the children it reaped, from getrusage) and prints the largest by test and file.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN = """
import json, os, resource, time
import pytest

def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c0, t0 = _cpu(), time.monotonic()
    yield
    with open(os.path.join(os.environ["SUITE_TIME_DIR"], f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps({"id": item.nodeid, "cpu": _cpu() - c0, "wall": time.monotonic() - t0}) + "\\n")
"""


def _jiffies() -> tuple[int, int]:
    """(busy, idle) clock ticks of the whole machine since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text(encoding="ascii").split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, idle


def main(argv: list[str]) -> int:
    per_test = "--per-test" in argv
    args = [a for a in argv if a != "--per-test"] or ["-n", "6", "--dist", "worksteal", "-q"]
    hz = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryDirectory(prefix="suite-time-") as tmp:
        env = dict(os.environ)
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
        if per_test:
            Path(tmp, "suite_time_plugin.py").write_text(PLUGIN, encoding="utf-8")
            env |= {
                "SUITE_TIME_DIR": tmp,
                "PYTHONPATH": os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")])),
            }
            cmd += ["-p", "suite_time_plugin"]
        busy0, idle0 = _jiffies()
        began = time.monotonic()
        code = subprocess.call(cmd, env=env)
        wall = time.monotonic() - began
        busy1, idle1 = _jiffies()
        print(f"suite: exit {code}, wall {wall:.0f} s, CPU used {(busy1 - busy0) / hz:.0f} s, "
              f"CPU idle {(idle1 - idle0) / hz:.0f} s ({os.cpu_count()} CPUs)")  # fmt: skip
        if per_test:
            rows = [
                json.loads(line) for f in Path(tmp).glob("*.jsonl") for line in f.read_text().splitlines()
            ]
            by_file: collections.Counter[str] = collections.Counter()
            for row in rows:
                by_file[row["id"].split("::")[0]] += row["cpu"]
            if os.environ.get("SUITE_TIME_ROWS"):  # every test's figures, for a closer look
                Path(os.environ["SUITE_TIME_ROWS"]).write_text(json.dumps(rows), encoding="utf-8")
            cpu, wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
            print(f"tests {len(rows)}: CPU {cpu:.0f} s, wall {wall:.0f} s")
            for row in sorted(rows, key=lambda r: -r["cpu"])[:15]:
                print(f"  {row['cpu']:6.1f} CPU-s {row['wall']:6.1f} s  {row['id']}")
            for name, cpu in by_file.most_common(10):
                print(f"  {cpu:6.1f} CPU-s  {name}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
