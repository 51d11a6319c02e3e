"""A spend above zero never prints as zero: a container that exits at once is billed a fraction of a
hundredth of a cent, and `acagpu cost` printed that bill as `$0.0000`, beside runs whose bill is
really nothing. Such an amount reads `<$0.0001`; the JSON keeps the number.

Real processes: `acagpu emulator serve` and the CLI as subprocesses; the emulator's Cost Management
bills the replica's real life (milliseconds of a `sh -c 'exit 0'` run in its sandbox).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def test_a_bill_of_a_fraction_of_a_hundredth_cent_is_not_printed_as_zero(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        ran = _acagpu(shell, "run", "--gpu", "t4", "--yes", "--run-id", "tiny", "-o", "json", "busybox", "--",
                      "sh", "-c", "exit 0")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        listed = _acagpu(shell, "cost", "--since", "1d", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        row = next(r for r in json.loads(listed.stdout)["runs"] if r["run_id"] == "tiny")
        billed = row["billed_usd"]
        assert billed is not None and 0 < billed < 0.00005, row  # what this test is about
        table = _acagpu(shell, "cost", "--since", "1d")
        assert table.returncode == 0, table.stderr
        line = next(x for x in table.stdout.splitlines() if x.startswith("tiny"))
        assert "$0.0000" not in line and "<$0.0001" in line, line
