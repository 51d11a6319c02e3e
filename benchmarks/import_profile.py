"""Where one acagpu command's import time goes: `python -X importtime`'s self times summed by package,
the acagpu modules that cost most and who imported them, and (with --unused) the acagpu modules the
command loaded but never ran a function of.

benchmarks/command_startup.py says how much a command spends importing; this says on what. Point it
at an emulator first (`acagpu emulator serve --env-file F`, then `source F`). The times are
importtime's wall microseconds (a busy machine's waits included): compare runs on one machine.
--unused runs the command a second time in this process with a profile hook (sys.setprofile) that
notes every function that runs: a module that is loaded and never ran is a candidate to import
later (data-only modules, tables of constants, show there too).

Usage: python benchmarks/import_profile.py [--top 25] [--unused] -- status -o json
"""

from __future__ import annotations

import argparse
import collections
import os
import runpy
import subprocess
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any


@dataclass
class Row:
    name: str
    self_us: int
    depth: int
    importer: str = ""


def importtime_rows(command: list[str]) -> list[Row]:
    """The command's `-X importtime` lines, each with the module that imported it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "aca_gpu", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        rows.append(Row(name.strip(), int(own), (len(name) - len(name.lstrip(" ")) - 1) // 2))
    # importtime prints a module after everything it imported, one level deeper: the importer of a
    # row is the next row below it that is less deep
    for i, row in enumerate(rows):
        row.importer = next((r.name for r in rows[i + 1 :] if r.depth < row.depth), "")
    return rows


def _package(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:3]) if parts[0] in ("azure", "aca_gpu") else parts[0]


def never_ran(command: list[str]) -> list[str]:
    """The acagpu modules this command loads without running any of their functions."""
    ran: set[str] = set()

    def called(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name != "<module>" and code.co_flags & 0x2:  # a function's frame
            ran.add(code.co_filename)

    sys.setprofile(called)
    threading.setprofile(called)
    sys.argv = ["acagpu", *command]
    stdout = sys.stdout
    try:
        with open(os.devnull, "w") as sys.stdout:
            runpy.run_module("aca_gpu", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        sys.stdout = stdout
        sys.setprofile(None)
        threading.setprofile(None)
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("aca_gpu.")
        and (path := getattr(module, "__file__", None))
        and not path.endswith("__init__.py")
        and path not in ran
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--unused", action="store_true", help="name the acagpu modules that never ran")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the acagpu command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rows = importtime_rows(command)
    total = sum(r.self_us for r in rows)
    print(f"acagpu {' '.join(command)}: {len(rows)} modules, {total / 1000:.1f} ms of imports (self, summed)")
    by_package: collections.Counter[str] = collections.Counter()
    for row in rows:
        by_package[_package(row.name)] += row.self_us
    print("by package (ms):")
    for package, spent in by_package.most_common(args.top):
        print(f"  {spent / 1000:7.1f}  {package}")
    own = sorted((r for r in rows if r.name.startswith("aca_gpu")), key=lambda r: -r.self_us)
    print(f"acagpu modules (ms), {sum(r.self_us for r in own) / 1000:.1f} in all:")
    for row in own[: args.top]:
        print(f"  {row.self_us / 1000:7.2f}  {row.name}  <- {row.importer or '(inside a function)'}")
    if args.unused:
        importers = {r.name: r.importer for r in rows}
        print("acagpu modules loaded whose code never ran:")
        for name in never_ran(command):
            print(f"  {name}  <- {importers.get(name) or '(inside a function)'}")


if __name__ == "__main__":
    main()
