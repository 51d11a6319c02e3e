"""Bad fan-out input is refused before anything exists: one line, exit 2 (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    shell = env or {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    shell = shell | {"ACAGPU_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    return subprocess.run(
        [*ACAGPU, "run", *args], env=shell, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def _refused(done: subprocess.CompletedProcess[str], said: str) -> None:
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and said in errors[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--shards", "0"), "--shards 0: use 1 to 10000"),
        (("--shards", "3", "--map", "items.txt"), "give --shards N or --map FILE, not both"),
        (("--map", "missing.txt"), "--map missing.txt: cannot read it"),
        (("--map", "empty.txt"), "--map empty.txt: no items"),
        (("--map", "big.json"), "item 1 is 40000 bytes, over 32768 for one env value"),
        (("--shards", "2", "--parallel", "0"), "--parallel 0: at least 1"),
        (("--shards", "2", "--retry-on-exit", "x"), "--retry-on-exit 'x'"),
        (("--shards", "2", "-e", "ACAGPU_SHARD_INDEX=3"), "ACAGPU_ are reserved"),
        (("--shards", "2", "--output-dir", "out"), "--output-dir needs a warm environment"),
        (("--rerun-failed", "nosuch1"), "no fan-out run nosuch1 is recorded here"),
    ],
)
def test_bad_fanout_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    (tmp_path / "items.txt").write_text("a\nb\n")
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "big.json").write_text(json.dumps(["small", "x" * 40000]))
    image = () if args[0] == "--rerun-failed" else ("busybox", "--", "true")
    _refused(_run(tmp_path, "--emulator", "--yes", *args, *image), said)


def test_rerun_of_a_run_with_no_failed_shard_or_not_a_fanout_is_refused(tmp_path: Path) -> None:
    # the two runs only have to exist: made 10x faster and polled fast, the refusals are the test
    fast = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | {
        "ACAGPU_POLLING_INTERVAL": "0.1"
    }
    # 30 emulated minutes are 3.6 wall s at 0.002: a busy machine outlived them (DeadlineExceeded)
    made = ("--emulator", "--time-scale", "0.002", "--max-minutes", "600", "--yes", "-o", "json")
    ok = _run(tmp_path, *made, "--shards", "2", "busybox", "--", "true", env=fast)
    assert ok.returncode == 0, ok.stderr
    run_id = json.loads(ok.stdout)["run_id"]
    _refused(_run(tmp_path, "--emulator", "--yes", "--rerun-failed", run_id), "every shard of run")
    single = _run(tmp_path, *made, "busybox", "--", "true", env=fast)
    assert single.returncode == 0, single.stderr
    other = json.loads(single.stdout)["run_id"]
    _refused(_run(tmp_path, "--emulator", "--yes", "--rerun-failed", other), f"run {other} is not a fan-out")


def test_parallel_that_the_quota_can_never_serve_is_refused_before_anything_exists(tmp_path: Path) -> None:
    with emulator_serve(
        tmp_path / "emu.env", extra=("--faults", "quota:region=eastus,profile=T4,limit=0")
    ) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        shell.pop("ACAGPU_ENV", None)
        # a plan writes nothing: in a subscription without Microsoft.App it does not register it to
        # read the quota (the SDK would), and says the run will
        plan = _run(
            tmp_path, "--dry-run", "--shards", "4", "--parallel", "2", "busybox", "--", "true", env=shell
        )
        assert plan.returncode == 0 and "quota not read: Microsoft.App is not registered" in plan.stdout, plan
        done = _run(tmp_path, "--yes", "--shards", "4", "--parallel", "2", "busybox", "--", "true", env=shell)
        _refused(done, "the GPU quota of region eastus is 0")
        assert "hint:" in done.stderr and "Quota" in done.stderr  # how to raise it
        inventory = requests.get(
            f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/inventory",
            headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
            verify=emu["ACAGPU_CA_BUNDLE"],
            timeout=30,
        ).json()
        assert not inventory["jobs"] and not inventory["environments"], inventory
        groups = [g for g in inventory.get("resource_groups", inventory.get("groups", []))]
        assert not groups, inventory
