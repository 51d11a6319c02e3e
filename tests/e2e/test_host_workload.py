"""`up` against the emulator's host workload: the real tester runs as a real process on this machine.

Without a GPU the honest outcome is the tester's own `no-cuda` failure (exit 5) with a real CPU
baseline; on a GPU host the same path carries real TFLOP/s. A machine without a driver has no
`nvidia-smi`: there a recorded one (an ACA A100's table) stands in for it, since a pair whose probe
fails stops its tester at once and the tester would never be seen here. Real seconds, not scaled
ones, bound the job here, and the tester's last lines (printed in a burst at exit) must reach the
log stream.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import Waiter, open_cloud
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.tester.up import up


@pytest.fixture(scope="module")
def host_emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=0.01, workload="host", registered=True) as emu:
        yield emu


RECORDED = Path(__file__).parents[1] / "fixtures/nvidia_smi/50-seed-535.54.03-aca-a100-80gb-pcie.txt"
CSV = "name, driver_version, memory.total [MiB], uuid\nNVIDIA A100 80GB PCIe, 535.54.03, 81920 MiB, GPU-0\n"


@pytest.fixture
def nvidia_smi(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's own nvidia-smi, else a recorded one first on PATH (the host workload's processes
    read PATH when they start)."""
    if shutil.which("nvidia-smi") is not None:
        return
    folder = tmp_path_factory.mktemp("recorded-smi")
    table = RECORDED.read_text().split("\n---\n", 1)[1]
    (folder / "table.txt").write_text(table)
    (folder / "query.csv").write_text(CSV)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in\n  "") cat "{folder}/table.txt" ;;\n  --query-gpu=*) cat "{folder}/query.csv" ;;\n'
        '  *) echo "recorded nvidia-smi: $* is not recorded" ;;\nesac\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


class _Result:
    def __init__(self, outcome: RunOutcome) -> None:
        self.exit_code, self.doc = outcome.exit_code, outcome.document()


def _up(emu: EmulatorServer, run_id: str) -> _Result:
    settings = load_settings(env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}, file={})
    plan = make_plan(settings, UpRequest(run_id=run_id, max_minutes=3, wait=True), owner="test")
    return _Result(up(open_cloud(settings), plan, NullProgress(), Waiter(interval=0.1)))


def test_up_runs_the_real_tester_on_this_host(
    host_emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, nvidia_smi: None
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the host's processes would leave files
    result = _up(host_emulator, "host1")
    tester = result.doc["tester"]["result"]
    if tester.get("gpu_count"):  # a GPU host: the whole pipeline carries real numbers
        assert result.exit_code == 0, tester
        assert tester["status"] == "pass" and not tester["simulated"]
    else:
        assert result.exit_code == 5
        assert (tester["status"], tester["reason"]) == ("fail", "no-cuda")
        assert tester["cpu_gflops"] and tester["cpu_gflops"] > 0 and tester["simulated"] is False
    assert result.doc["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}
    assert host_emulator.inventory()["empty"]
    # a container's /tmp goes with it: the bootstrap's script folder is not left on this machine
    assert list(tmp_path.iterdir()) == []
    assert list(host_emulator.workdir.rglob("gpu_tester.py")) == []


def test_nvidia_smi_runs_while_a_slow_tester_is_still_working(
    host_emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch, nvidia_smi: None
) -> None:
    """The explorer alone gates nvidia-smi: a tester that takes seconds must not hold it back."""
    from aca_gpu.models import ContainerDef
    from aca_gpu.workflow.base import checks

    def slow_tester(image: str, profile: checks.Profile) -> ContainerDef:
        script = 'sleep 6; echo \'ACAGPU_RESULT {"schema": 1, "status": "fail", "reason": "slow"}\''
        return ContainerDef(
            name="gpu-tester", image=image, cpu=8, memory="56Gi", command=("sh",), args=("-c", script)
        )

    monkeypatch.setattr(checks, "tester_container", slow_tester)
    result = _up(host_emulator, "host2")
    phases = result.doc["phases"]
    # explorer ready and nvidia-smi done long before the 6 s tester prints its line
    assert phases["probe start"] + phases["nvidia-smi"] < 4.5, phases
    # the tester's first (and only) line came seconds after nvidia-smi was done
    assert phases["tester start"] > phases["probe start"] + phases["nvidia-smi"] + 1.0, phases
    assert result.doc["tester"]["result"]["reason"] == "slow"
    assert host_emulator.inventory()["empty"]
