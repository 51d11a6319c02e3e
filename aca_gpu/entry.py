"""The console entry point: a Ctrl-C that lands while Python is still loading the CLI ends like any
other (one line, exit 130, a JSON document with `-o json`), never in a traceback."""

from __future__ import annotations

import itertools
import json
import sys

MESSAGE = "interrupted (Ctrl-C) while acagpu was starting; nothing was done"


def _wants_json(argv: list[str]) -> bool:
    return any(a in ("-ojson", "--output=json") for a in argv) or any(
        a in ("-o", "--output") and b == "json" for a, b in itertools.pairwise(argv)
    )


def main() -> None:
    try:
        from aca_gpu.cli import main as cli_main
    except KeyboardInterrupt:
        argv = sys.argv[1:]
        if _wants_json(argv):
            command = next((a for a in argv if not a.startswith("-")), "")
            error = {"message": MESSAGE, "code": "Interrupted", "exit_code": 130, "hint": None}
            print(json.dumps({"schema": 1, "command": command, "status": "error", "error": error}))
        print(f"error: {MESSAGE}", file=sys.stderr)
        raise SystemExit(130) from None
    cli_main()
