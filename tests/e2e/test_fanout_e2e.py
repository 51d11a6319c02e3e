"""`acagpu run --shards/--map` against `acagpu emulator serve` in a second shell.

The emulator runs each shard's command for real in Podman (the test image is in its local
storage), so what a shard prints, writes to its share and exits with is the container's own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serving import emulator_get, emulator_serve
from tests.local.conftest import podman, test_image  # noqa: F401  (fixtures)

ACAGPU = [sys.executable, "-m", "aca_gpu"]
ROOT = Path(__file__).resolve().parents[2]
SHARD_SCRIPT = (
    'echo $ACAGPU_SHARD_INDEX > "$ACAGPU_OUTPUT_DIR/i.txt"; [ "$ACAGPU_SHARD_INDEX" != 7 ] || exit 3'
)


def _acagpu(shell: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _shell(emu: dict[str, str], tmp_path: Path) -> dict[str, str]:
    shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path / "cache")}
    shell.pop("ACAGPU_ENV", None)
    return shell


def _inventory(emu: dict[str, str]) -> dict[str, Any]:
    return emulator_get(emu, "inventory")


def _only_the_warm_environment_left(emu: dict[str, str]) -> None:
    deadline, inventory = time.monotonic() + 60, {}
    while time.monotonic() < deadline:
        inventory = _inventory(emu)
        assert not inventory["replicas"], inventory  # billing stopped at once
        if not inventory["jobs"] and [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]:
            return
        time.sleep(0.2)
    raise AssertionError(f"left behind: {inventory}")


@pytest.mark.slow(36)
def test_shards_write_their_outputs_one_fails_and_only_it_is_rerun(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = _shell(emu, tmp_path)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        before = json.loads(_acagpu(shell, "env", "show", "lab", "-o", "json").stdout)
        out = tmp_path / "out"

        # --max-minutes is on the emulated clock (0.002 here): the default 30 is 3.6 wall s, which a
        # Podman start on a busy machine outran (a shard DeadlineExceeded beside a second suite)
        done = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--shards", "20",
                       "--parallel", "5", "--max-minutes", "600", "--output-dir", str(out), test_image,
                       "--", "sh", "-c", SHARD_SCRIPT)  # fmt: skip
        assert done.returncode == 1, done.stderr  # a shard's own failure: exit 1 (docs/fanout.md)
        doc = json.loads(done.stdout)
        assert "1 of 20 shards failed: [7] exit 3" in done.stderr  # the one line names the shard and code
        assert doc["summary"]["failed_indexes"] == [7]
        seven = doc["shards"][7]
        assert (seven["index"], seven["status"], seven["fault"], seven["exit_code"]) == (
            7,
            "failed",
            "user",
            3,
        )
        assert len(seven["attempts"]) == 1  # no --retries: the container's failure is not retried
        assert all(
            s["status"] == "succeeded" and len(s["attempts"]) == 1 for s in doc["shards"] if s["index"] != 7
        )
        assert doc["parallel"]["used"] <= 5 and doc["pacing"]["limit"] == doc["parallel"]["used"]
        assert doc["pacing"]["starts"] == 20
        assert doc["cost"]["gpu_seconds"] > 0 and doc["teardown"]["billing_stopped"] is True

        # every shard but 7 wrote its index into its own folder, downloaded into out/k
        files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        assert files == sorted(f"{k}/i.txt" for k in range(20) if k != 7), files
        assert all((out / str(k) / "i.txt").read_text() == f"{k}\n" for k in range(20) if k != 7)
        assert doc["outputs"]["files"] == 19

        again = _acagpu(shell, "run", "--yes", "-o", "json", "--rerun-failed", doc["run_id"])
        assert again.returncode == 1, again.stderr
        rerun = json.loads(again.stdout)
        assert [s["index"] for s in rerun["shards"]] == [7]  # shard 7 alone, with its own index
        assert rerun["pacing"]["starts"] == 1 and rerun["shards"][0]["exit_code"] == 3
        assert rerun["shards"][0]["attempts"][0]["status"] == "failed"
        assert rerun["run_id"] != doc["run_id"]

        _only_the_warm_environment_left(emu)
        after = json.loads(_acagpu(shell, "env", "show", "lab", "-o", "json").stdout)
        assert (after["state"], after["name"]) == ("idle", before["name"])  # the environment untouched
    left = subprocess.run(
        [podman, "ps", "-a", "-q", "--filter", f"name=acagpu-emu-{emu['ACAGPU_EMULATOR_PID']}-"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == ""


def test_map_from_python_returns_results_in_item_order(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    """examples/orchestrator.py: a plain script standing in for an orchestrator's task."""
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = _shell(emu, tmp_path)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        script = ROOT / "examples" / "orchestrator.py"
        done = subprocess.run(
            [sys.executable, str(script), "--env", "lab", "--image", test_image],
            env=shell | {"PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        items = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
        assert lines[: len(items)] == [f"{k} {item} ok done:{item}" for k, item in enumerate(items)], (
            done.stdout
        )
        # money as acagpu prints it everywhere (units.usd_text), through the API's cost_text
        assert re.fullmatch(
            r"all 6 items done; cost ≈ (\$\d+\.\d{2,4}|<\$0\.0001) \([\d.]+ GPU-seconds\)", lines[-1]
        ), lines[-1]
        _only_the_warm_environment_left(emu)


def _container_processes(prefix: str = "acagpu-emu-") -> set[str]:
    """`pid name` of every conmon of an emulator container on this host: `podman ps -a` lists
    none of a container removed mid-create while its conmon and `runc init` live on."""
    table = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in table.splitlines():
        words = line.split()
        if len(words) > 2 and words[1].endswith("conmon") and "-n" in words:
            name = words[words.index("-n") + 1]
            if name.startswith(prefix):
                found.add(f"{words[0]} {name}")
    return found


def test_ctrl_c_mid_fanout_stops_every_running_shard_and_leaves_nothing(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    before = _container_processes()  # another run's, not this test's to judge
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = _shell(emu, tmp_path)
        assert _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes").returncode == 0
        proc = subprocess.Popen(
            [*ACAGPU, "run", "--env", "lab", "--yes", "--shards", "8", "--parallel", "3", "--run-id", "fanc1",
             test_image, "--", "sh", "-c", "echo started $ACAGPU_SHARD_INDEX; sleep 120"],
            env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("[")  # a shard runs and prints, prefixed [k]
        assert _inventory(emu)["replicas"], "no replica ran"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "interrupted" in err
        _only_the_warm_environment_left(emu)
    left = subprocess.run(
        [podman, "ps", "-a", "-q", "--filter", f"name=acagpu-emu-{emu['ACAGPU_EMULATOR_PID']}-"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == ""
    deadline, stayed = time.monotonic() + 10, {"?"}
    while stayed and time.monotonic() < deadline:  # a conmon killed a moment ago may still be listed
        stayed = _container_processes(f"acagpu-emu-{emu['ACAGPU_EMULATOR_PID']}-") - before
        time.sleep(0.2)
    assert not stayed, f"container processes left on the host: {stayed}"


def test_map_file_gives_each_shard_its_item_and_logs_failed_prints_only_the_failed(tmp_path: Path) -> None:
    """--map: item k reaches shard k as ACAGPU_ITEM, the document lists the shards in item order;
    --logs failed: only the failed shard's lines are printed, prefixed [k]."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps(["red", "green", {"n": 3}, "blue"]))
    shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
    shell |= {"ACAGPU_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    shell |= {"ACAGPU_POLLING_INTERVAL": "0.1"}  # items, lines and statuses do not depend on the speed
    script = 'echo "got $ACAGPU_ITEM of $ACAGPU_SHARD_COUNT"; [ "$ACAGPU_ITEM" != green ] || exit 2'
    # 600 emulated minutes to start (72 s here): a shard slow to start on a busy machine is not the
    # platform's failure to retry (its first attempt's lines and its second's were both printed)
    fast = ("--emulator", "--time-scale", "0.002", "--start-timeout", "600m", "--yes")
    table = _acagpu(shell, "run", *fast, "--map", str(items), "--logs", "failed", "busybox", "--", "sh", "-c",
                    script)  # fmt: skip
    assert table.returncode == 1, table.stderr
    only_failed = ["[1] got green of 4"]  # the failed shard's lines, once
    assert table.stdout.splitlines() == only_failed, (table.stdout, table.stderr)
    assert "1 of 4 shards failed: [1] exit 2" in table.stderr
    done = _acagpu(shell, "run", *fast, "-o", "json", "--map", str(items), "busybox", "--", "sh", "-c",
                   script)  # fmt: skip
    doc = json.loads(done.stdout)
    assert [(s["index"], s["item"]) for s in doc["shards"]] == [
        (0, "red"), (1, "green"), (2, '{"n":3}'), (3, "blue")
    ]  # fmt: skip
    assert [s["output_tail"] for s in doc["shards"]] == [
        ["got red of 4"], ["got green of 4"], ['got {"n":3} of 4'], ["got blue of 4"]
    ]  # fmt: skip
    assert [s["status"] for s in doc["shards"]] == ["succeeded", "failed", "succeeded", "succeeded"]


def test_a_shards_output_tail_holds_its_lines_and_acagpus_notes_apart(tmp_path: Path) -> None:
    """A shard's lines read from Log Analytics (every log stream cut before its first line) came
    with acagpu's note as the last line of `output_tail`: an orchestrator taking the last line as
    the shard's answer got "(acagpu) 1 line(s) came from Log Analytics". Notes are apart now."""
    with emulator_serve(tmp_path / "emu.env", extra=("--faults", "log_drop:after=0,count=1000")) as emu:
        shell = _shell(emu, tmp_path)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes")
        assert made.returncode == 0, made.stderr
        done = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--shards", "2",
                       "--max-minutes", "600", "busybox", "--", "sh", "-c",
                       'echo "done:$ACAGPU_SHARD_INDEX"')  # fmt: skip
        assert done.returncode == 0, done.stderr
        shards = json.loads(done.stdout)["shards"]
        notes = [s.get("notes") for s in shards]
        assert [s["output_tail"] for s in shards] == [["done:0"], ["done:1"]], notes
        assert all(any("Log Analytics" in n for n in s["notes"]) for s in shards), shards
