"""A job's `sh -c` line without a container (the simulated sandbox, or `--workload host` on a GPU
machine): the mount path in its env and its line is the share's folder on this machine, the one the
file data plane serves, so a fan-out shard's results land where `download_tree` reads them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aca_gpu.emulator.workloads.base import Container, ContainerSpec
from aca_gpu.emulator.workloads.host import HostWorkload
from aca_gpu.emulator.workloads.podman import ENV_SWITCH
from aca_gpu.emulator.workloads.simulated import SimulatedWorkload

LINE = (
    'echo $ACAGPU_SHARD_INDEX > "$ACAGPU_OUTPUT_DIR/i.txt"; echo also > /out/r1/top.txt; '
    '[ "$ACAGPU_SHARD_INDEX" != 7 ] || exit 3'
)


def _spec(index: int) -> ContainerSpec:
    return ContainerSpec(
        name="main",
        image="busybox:1.36",
        command=("sh", "-c", LINE),
        args=(),
        env={"ACAGPU_SHARD_INDEX": str(index), "ACAGPU_OUTPUT_DIR": f"/out/r1/{index}", "OTHER": "/outside"},
        profile_type="Consumption",
        kind="job",
        replica=f"fan-abc{index}-xyz",
        mounts=(("acct-results", "/out", False),),
    )


def _exit(container: Container) -> int:
    deadline = time.monotonic() + 20
    while container.exit_code is None:
        assert time.monotonic() < deadline, "container did not exit"
        time.sleep(0.02)
    return container.exit_code


@pytest.mark.parametrize("kind", ["simulated", "host"])
def test_a_shell_line_writes_into_the_share_folder_its_mount_names(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SWITCH, "off")  # no Podman: the line runs in the sandbox
    workload = SimulatedWorkload(workdir=tmp_path) if kind == "simulated" else HostWorkload(workdir=tmp_path)
    share = tmp_path / "storages" / "acct-results"
    for index in (6, 7):
        (share / "r1" / str(index)).mkdir(parents=True, exist_ok=True)  # made before the start
    codes = [_exit(workload.start(_spec(index), time_scale=0.01)) for index in (6, 7)]
    assert codes == [0, 3]
    assert [(share / "r1" / str(i) / "i.txt").read_text() for i in (6, 7)] == ["6\n", "7\n"]
    assert (share / "r1" / "top.txt").read_text() == "also\n"  # the path in the line itself too
    assert not (Path("/out/r1") / "top.txt").exists()  # nothing written outside the share's folder
