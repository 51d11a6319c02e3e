"""`run --shards --output-dir` when the share's answers are cut or lost on the way back.

Real processes: `acagpu emulator serve` (its sandbox runs each shard's `sh -c` and writes into the
environment's results share), the chaos proxy in front (the Azure Files data plane goes through it
like ARM does), and the CLI as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.chaos.proxy import ChaosProxy
from tests.e2e.serving import serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SANDBOX = "busybox"  # not in Podman's storage: the emulator runs `sh -c` in its sandbox
FOLDER = "/acagpu-results/[^/]+"  # a run's folder on the results share
WRITE = 'echo $ACAGPU_SHARD_INDEX > "$ACAGPU_OUTPUT_DIR/$ACAGPU_SHARD_INDEX.txt"'


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)


def _fired(proxy: ChaosProxy) -> list[str]:
    answer = requests.get(f"{proxy.endpoint}/_chaos/events", verify=proxy.ca_bundle, timeout=10)
    return [f"{e['fault']} {e['path']}" for e in answer.json()["events"]]


@pytest.mark.slow(15)  # an emulator, a warm environment, 4 shards, and the lost file's 3.5 s of retries
def test_a_file_cut_on_the_way_is_fetched_again_and_one_never_arriving_is_named_not_left_empty(
    tmp_path: Path,
) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        shell["ACAGPU_CACHE_DIR"] = str(tmp_path / "cache")
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {
                "rules": [
                    # shard 1's file: every answer lost (past every retry); shard 2's: cut once
                    {"fault": "reset", "method": "GET", "path": f"{FOLDER}/1/1\\.txt$", "count": 0},
                    {"fault": "truncate", "method": "GET", "path": f"{FOLDER}/2/2\\.txt$"},
                ]
            }
        )
        out = tmp_path / "out"
        done = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--shards", "4", "--max-minutes",
                       "600", "--output-dir", str(out), SANDBOX, "--", "sh", "-c", WRITE)  # fmt: skip
        fired = {f.split()[0] for f in _fired(proxy)}
        assert fired == {"truncate", "reset"}, _fired(proxy)
        doc = json.loads(done.stdout)
        assert [s["status"] for s in doc["shards"]] == ["succeeded"] * 4, doc["shards"]
        outputs = doc["outputs"]
        # the others all came, the cut one whole after its retry; the lost one is named, not counted
        got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        assert got == ["0/0.txt", "2/2.txt", "3/3.txt"], got  # no empty 1/1.txt, no partial file
        assert [(out / f).read_text() for f in got] == ["0\n", "2\n", "3\n"]
        assert outputs["files"] == 3 and outputs["shards_with_files"] == [0, 2, 3], outputs
        assert [m["path"] for m in outputs["missing"]] == ["1/1.txt"], outputs
        assert outputs["retries"] == 1 + 3, outputs  # the cut file once, the lost file's three
        assert "1/1.txt" in outputs["error"] and "acagpu-results" in outputs["error"], outputs
        # the work is done but the files are not all here: not exit 0 (docs/fanout.md)
        assert done.returncode == 7, done.stderr
        assert doc["error"]["code"] == "OutputsNotDownloaded", doc["error"]
        assert "retrying 1/1.txt" in done.stderr and "retrying 2/2.txt" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
