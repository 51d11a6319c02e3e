"""Emulated containers run real processes: exec through real shells, real exit codes, real cleanup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from aca_gpu.emulator.workloads import ContainerSpec, ExecNotFound, StartFailure, make_workload
from aca_gpu.emulator.workloads.base import Container
from aca_gpu.emulator.workloads.host import HostWorkload
from aca_gpu.emulator.workloads.simulated import SimulatedWorkload
from aca_gpu.gpu.profiles import lookup_gpu

T4 = "Consumption-GPU-NC8as-T4"
A100 = "Consumption-GPU-NC24-A100"
CUDA_IMAGE = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"


def spec(
    *,
    kind: str = "app",
    profile: str = A100,
    image: str = CUDA_IMAGE,
    command: tuple[str, ...] = ("sleep",),
    args: tuple[str, ...] = ("infinity",),
    env: Mapping[str, str] | None = None,
    replica: str = "replica-0",
) -> ContainerSpec:
    return ContainerSpec("main", image, command, args, dict(env or {}), profile, kind, replica)


@pytest.fixture
def containers() -> Iterator[list[Container]]:
    started: list[Container] = []
    yield started
    for c in started:
        c.stop()


@pytest.fixture
def simulated(tmp_path: Path) -> SimulatedWorkload:
    workload = make_workload("simulated", workdir=tmp_path)
    assert isinstance(workload, SimulatedWorkload)
    return workload


def wait_exit(container: Container, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while container.exit_code is None:
        assert time.monotonic() < deadline, "container did not exit"
        time.sleep(0.02)
    return container.exit_code


def shell(container: Container, script: str) -> str:
    proc = container.exec("sh")
    out, _ = proc.communicate(script.encode(), timeout=30)
    return out.decode()


def test_exec_sh_reports_real_exit_codes(simulated: SimulatedWorkload, containers: list[Container]) -> None:
    c = simulated.start(spec(), time_scale=0)
    containers.append(c)
    out = shell(c, "true; echo MARK$?\nsh -c 'exit 3'; echo MARK$?\necho $HOSTNAME\n")
    assert out.splitlines() == ["MARK0", "MARK3", "replica-0"]


def test_nvidia_smi_inside_the_container_is_the_emulated_one(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    c = simulated.start(spec(profile="NC48-A100"), time_scale=0)
    containers.append(c)
    out = shell(c, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo MARK$?\n")
    assert out.splitlines() == ["NVIDIA A100 80GB PCIe, 550.144.03"] * 2 + ["MARK0"]
    proc = c.exec("nvidia-smi")
    table, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert (
        b"| NVIDIA-SMI 550.144.03             Driver Version: 550.144.03     CUDA Version: 12.4     |"
        in table
    )
    bad = shell(c, "nvidia-smi --nope; echo MARK$?\n")
    assert bad.splitlines()[-1] == "MARK2"


@pytest.mark.parametrize("command", ["ls -la", "nope-not-a-binary", ""])
def test_exec_of_anything_but_one_executable_is_not_found(
    simulated: SimulatedWorkload, containers: list[Container], command: str
) -> None:
    c = simulated.start(spec(), time_scale=0)
    containers.append(c)
    with pytest.raises(ExecNotFound) as err:
        c.exec(command)
    assert f'exec: "{command}": executable file not found in $PATH' in err.value.message


def test_cpu_only_profile_has_no_nvidia_smi(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    assert simulated.gpu_name("Consumption") is None
    assert simulated.gpu_name(T4) == "Tesla T4"
    c = simulated.start(
        spec(profile="Consumption", image="mcr.microsoft.com/azurelinux/base/core:3.0"), time_scale=0
    )
    containers.append(c)
    with pytest.raises(ExecNotFound):
        c.exec("nvidia-smi")


def test_image_needing_newer_cuda_fails_to_start(tmp_path: Path) -> None:
    image = "nvidia/cuda:13.0.0-runtime-ubuntu24.04"
    with pytest.raises(StartFailure) as err:
        make_workload("simulated", workdir=tmp_path).start(spec(image=image, profile=T4), time_scale=0)
    assert err.value.reason == "ContainerCreateFailure"
    assert "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, please update" in (
        err.value.message
    )
    newer = make_workload("simulated", driver_version="580.126.09", workdir=tmp_path)
    c = newer.start(spec(image=image, profile=T4), time_scale=0)
    c.stop()


@pytest.mark.parametrize("profile", [T4, A100, "NC96-A100"])
def test_simulated_tester_prints_one_datasheet_result(
    simulated: SimulatedWorkload, containers: list[Container], profile: str
) -> None:
    tester = spec(
        kind="job",
        profile=profile,
        command=("python", "-c", "exec(...)"),
        args=(),
        env={"ACAGPU_TESTER_SRC": "print('x')"},
    )
    c = simulated.start(tester, time_scale=0.001)
    containers.append(c)
    assert wait_exit(c) == 0
    lines = c.logs()
    results = [line for line in lines if line.startswith("ACAGPU_RESULT ")]
    assert len(results) == 1
    assert any(line.startswith("Elapsed Time: ") and line.endswith(" seconds") for line in lines)
    doc = json.loads(results[0].removeprefix("ACAGPU_RESULT "))
    name = simulated.gpu_name(profile)
    assert name is not None
    peak = lookup_gpu(name)
    assert peak is not None
    assert doc["simulated"] is True and doc["status"] == "pass"
    assert doc["gpu"]["name"] == name
    assert 0.6 * peak.fp32_tflops < doc["tflops"]["fp32"] < 0.9 * peak.fp32_tflops
    assert all(60 <= v <= 90 for v in doc["pct_of_peak"].values())
    assert ("bf16" in doc["tflops"]) == (peak.bf16_tflops is not None)
    assert c.logs(len(lines) - 1) == [results[0]]


def test_simulated_tester_parses_with_the_tools_parser(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    tester_result = pytest.importorskip("aca_gpu.gpu.tester_result")
    c = simulated.start(
        spec(kind="job", profile="NC48-A100", command=("python", "gpu_tester.py"), args=()), time_scale=0
    )
    containers.append(c)
    wait_exit(c)
    result = tester_result.parse_tester_output("\n".join(c.logs()))
    assert result.status == "pass" and result.simulated and not result.legacy
    assert result.gpu_count == 2 and result.gpu_name == "NVIDIA A100 80GB PCIe"
    assert set(result.rates) == {"fp32", "tf32", "fp16", "bf16"}
    assert result.correct is True and result.speedup is not None and result.speedup > 1
    assert result.allreduce_busbw_gbps is not None
    assert result.driver == "550.144.03"


def test_other_jobs_complete_and_explorers_idle(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    job = simulated.start(spec(kind="job", command=("echo",), args=("hello",)), time_scale=0.001)
    explorer = simulated.start(spec(), time_scale=0.001)
    containers += [job, explorer]
    assert wait_exit(job) == 0
    # podman cannot run it here (image not in its storage): its one line says so, and why
    [line] = job.logs()
    assert line.startswith("echo hello: completed (simulated run; not run: "), line
    time.sleep(0.1)
    assert explorer.exit_code is None and "== CUDA ==" in explorer.logs()  # the image's banner, then idle
    explorer.stop()
    explorer.stop()  # idempotent
    assert explorer.exit_code == 137


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_kills_exec_processes_and_their_children(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    c = simulated.start(spec(), time_scale=0)
    containers.append(c)
    proc = c.exec("sh")
    assert proc.stdin is not None
    proc.stdin.write(b"sleep 300 &\nsleep 301\n")
    proc.stdin.flush()
    time.sleep(0.3)
    assert _alive(proc.pid)
    c.stop()
    assert proc.poll() is not None
    deadline = time.monotonic() + 5
    while _alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(proc.pid), "the background sleep survived stop()"
    with pytest.raises(ExecNotFound):
        c.exec("sh")


def test_host_job_runs_the_real_command(tmp_path: Path, containers: list[Container]) -> None:
    host = make_workload("host", workdir=tmp_path)
    assert isinstance(host, HostWorkload)
    ok = host.start(spec(kind="job", command=("python", "-c", "print('hi')"), args=()), time_scale=1)
    code = "import os, sys; print(os.environ['GREETING']); print('oops', file=sys.stderr); sys.exit(3)"
    failing = host.start(
        spec(kind="job", command=("python3",), args=("-c", code), env={"GREETING": "hello"}), time_scale=1
    )
    containers += [ok, failing]
    assert wait_exit(ok) == 0 and ok.logs() == ["hi"]
    assert wait_exit(failing) == 3 and failing.logs() == ["hello", "oops"]


def test_host_job_is_killed_by_stop(tmp_path: Path) -> None:
    host = make_workload("host", workdir=tmp_path)
    c = host.start(
        spec(
            kind="job",
            command=(sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)"),
            args=(),
        ),
        time_scale=1,
    )
    deadline = time.monotonic() + 20
    while not c.logs() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.logs() == ["up"] and c.exit_code is None
    c.stop()
    assert c.exit_code == 137


def test_host_exec_uses_the_host_path(tmp_path: Path, containers: list[Container]) -> None:
    host = make_workload("host", workdir=tmp_path)
    c = host.start(spec(), time_scale=1)
    containers.append(c)
    assert shell(c, "echo MARK$?\n").strip() == "MARK0"
    if shutil.which("nvidia-smi") is None:
        assert host.driver_version == "n/a"
        with pytest.raises(ExecNotFound):
            c.exec("nvidia-smi")
    else:
        real = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert host.driver_version == real.stdout.splitlines()[0].strip()


def test_unknown_workload_kind_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown workload kind"):
        make_workload("cloud", workdir=tmp_path)


def test_tester_without_a_gpu_fails_with_no_cuda(
    simulated: SimulatedWorkload, containers: list[Container]
) -> None:
    tester_result = pytest.importorskip("aca_gpu.gpu.tester_result")
    c = simulated.start(
        spec(kind="job", profile="Consumption", command=("python", "gpu_tester.py"), args=()), time_scale=0
    )
    containers.append(c)
    assert wait_exit(c) == 1
    result = tester_result.parse_tester_output("\n".join(c.logs()))
    assert (result.status, result.reason, result.simulated) == ("fail", "no-cuda", True)
