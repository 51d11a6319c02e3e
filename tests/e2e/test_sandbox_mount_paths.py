"""A `sh -c` line run by the emulator's sandbox (no Podman image here) sees its `--mount` path where a
container would: the path is rewritten to the share's folder wherever a shell reads it as that path
(`ls /data;`, `cd /data && ...`, `(ls /data)`), and nowhere else (`/srv/data/x` is another path).

Real processes: `acagpu emulator serve` and the CLI as subprocesses, a warm environment, a share made
with `--create-share`. A rewrite that missed `/data;` printed `ls: cannot access '/data'` while
`cat /data/x` worked; one that matched inside `/srv/data/x` changed a path the user never mounted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


@pytest.mark.slow(26)
def test_a_mount_path_is_the_share_wherever_the_shell_reads_it_and_only_there(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        line = (
            "echo hi > /data/x; ls /data; cd /data && cat x; (ls /data); ls /data|wc -l; "
            "echo /srv/data/x; echo end"
        )
        ran = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--mount", "data:/data",
                      "--create-share", "example.invalid/none:1", "--", "sh", "-c", line)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        doc = json.loads(ran.stdout)
        assert doc["output"]["stdout"] == "x\nhi\nx\n1\n/srv/data/x\nend\n", doc["output"]
        assert "cannot access" not in doc["output"]["stderr"], doc["output"]["stderr"]
        gone = _acagpu(shell, "env", "delete", "lab", "--yes", "--wait", "-o", "json")
        assert gone.returncode == 0, gone.stderr
