"""Run test files while the machine is busy, to show which tests fail because of the load.

Tests that time what they watch must judge what acagpu controls, not how quickly a loaded machine
gets round to it. This starts `--busy N` processes that spin on the CPU (as another `make test`
would), runs `pytest` on the given paths `--runs` times back to back, and prints each run's outcome,
its wall time and the load average, then stops the spinners.

    .venv/bin/python benchmarks/under_load.py --busy 2 --runs 3 tests/e2e/test_no_silent_wait.py

Pass `--pytest-args "-n 4 --dist worksteal"` to run a whole suite as `make test` does. Exit 0 only
when every run passed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPIN = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="test files or node ids")
    parser.add_argument("--busy", type=int, default=2, help="CPU-spinning processes beside the tests")
    parser.add_argument("--runs", type=int, default=3, help="pytest runs, back to back")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, one string")
    args = parser.parse_args()

    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    failed = 0
    try:
        print(f"{args.busy} busy processes on {os.cpu_count()} CPUs; {args.runs} runs of {args.paths}")
        for run in range(1, args.runs + 1):
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += shlex.split(args.pytest_args) + args.paths
            started = time.monotonic()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
            took = time.monotonic() - started
            summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"run {run}: exit {done.returncode}, {took:.1f} s, load {load}: {summary}")
            if done.returncode != 0:
                failed += 1
                failures = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
                print("\n".join(f"  {line}" for line in failures))
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(f"{args.runs - failed} of {args.runs} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
