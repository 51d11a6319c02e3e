"""Queue mode against an emulator started without `--storage azurite`: one line that names the
flag, in seconds. The account's queue endpoint was Azure's own host name, which does not resolve
here: the Storage SDK retried it for 86 s under a `waiting for container` line, then exit 7 with
the SDK's multi-line message."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner

from aca_gpu.cli import cli


def test_a_queue_run_without_azurite_says_which_flag_serves_the_queues(emu: object, tmp_path: Path) -> None:
    made = CliRunner().invoke(cli, ["env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes"])
    assert made.exit_code == 0, made.output
    items = tmp_path / "items.txt"
    items.write_text("a\nb\n")
    began = time.monotonic()
    done = CliRunner().invoke(cli, ["run", "--env", "lab", "--yes", "-o", "json", "--map", str(items),
                                    "--workers", "2", "busybox", "--", "true"])  # fmt: skip
    assert time.monotonic() - began < 30  # no retries of a host that cannot resolve
    assert done.exit_code == 7, done.output
    doc = json.loads(done.stdout)
    message = doc["error"]["message"]
    assert "acagpu emulator serve --storage azurite" in message and "\n" not in message, message
    assert doc["summary"]["failed_indexes"] == [] and doc["summary"]["unfinished_indexes"] == [0, 1]
