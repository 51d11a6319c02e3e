"""One GPU per replica under `--workload host` (issue 36 item 13), on a faked two-GPU host.

The host's GPUs are what `nvidia-smi` lists, so an `nvidia-smi` of the test's own, first on PATH,
makes this machine a two-GPU host (CI has no GPU): it answers the queries the workload asks and
echoes any other call, so what a replica's `nvidia-smi` was asked is seen in its output. Real
processes throughout: each replica's main process prints the GPUs CUDA would see and runs its
`nvidia-smi`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient

from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.workloads.base import Container, ContainerSpec
from aca_gpu.emulator.workloads.host import HostWorkload
from aca_gpu.workflow.fanout.outcome import render_fanout
from tests.emulator.helpers import POLL, StaticCredential, job_body, make_env, make_rg, wait_for

A100 = "Consumption-GPU-NC24-A100"
FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=index,uuid,name) printf '0, GPU-aaaa, NVIDIA H200\\n1, GPU-bbbb, NVIDIA H200\\n' ;;
  --query-gpu=driver_version) echo 580.159.04 ;;
  --query-gpu=name) printf 'NVIDIA H200\\nNVIDIA H200\\n' ;;
  -L) printf 'GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb)\\n' ;;
  *) echo "host nvidia-smi $*" ;;
esac
"""
REPORT = (
    'echo "cuda=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"; '
    "nvidia-smi; nvidia-smi -L; nvidia-smi topo -m"
)


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "fake-driver"
    folder.mkdir()
    (folder / "nvidia-smi").write_text(FAKE_SMI)
    (folder / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def job(replica: str, profile: str = A100) -> ContainerSpec:
    return ContainerSpec(
        "main", "nvidia/cuda:12.4.1-base-ubuntu22.04", ("sh", "-c", REPORT), (), {}, profile, "job", replica
    )


def lines_of(c: Container) -> list[str]:
    deadline = time.monotonic() + 20
    while c.exit_code is None:
        assert time.monotonic() < deadline, "the replica did not exit"
        time.sleep(0.02)
    return c.logs()


@pytest.fixture
def started() -> Iterator[list[Container]]:
    containers: list[Container] = []
    yield containers
    for c in containers:
        c.stop()


def test_each_replica_sees_its_own_gpu_and_a_third_shares_and_says_so(
    tmp_path: Path, two_gpus: None, started: list[Container]
) -> None:
    host = HostWorkload(workdir=tmp_path / "work")
    a, b, c = (host.start(job(name), time_scale=1) for name in ("rep-a", "rep-b", "rep-c"))
    started += [a, b, c]
    assert lines_of(a) == [
        "cuda=GPU-aaaa nvidia=GPU-aaaa",
        "host nvidia-smi -i 0",  # the table of its GPU alone
        "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)",  # -L: its GPU's line alone
        "host nvidia-smi topo -m",  # a subcommand: the host's view (labelled in docs/emulator.md)
    ]
    assert lines_of(b)[:3] == [
        "cuda=GPU-bbbb nvidia=GPU-bbbb",
        "host nvidia-smi -i 1",
        "GPU 1: NVIDIA H200 (UUID: GPU-bbbb)",
    ]
    assert a.notice is None and b.notice is None  # type: ignore[attr-defined]
    assert lines_of(c)[0] == "cuda=GPU-aaaa nvidia=GPU-aaaa"  # the least held, lowest index
    assert c.notice is not None and "shares GPU 0 with 1 other" in c.notice  # type: ignore[attr-defined]
    assert host.seats.holders() == {"rep-a": (0,), "rep-b": (1,), "rep-c": (0,)}


def test_a_stopped_replica_gives_its_gpu_back_and_a_restart_keeps_its_own(
    tmp_path: Path, two_gpus: None, started: list[Container]
) -> None:
    host = HostWorkload(workdir=tmp_path / "work")
    first = host.start(job("rep-a"), time_scale=1)
    second = host.start(job("rep-b"), time_scale=1)
    again = host.start(job("rep-b"), time_scale=1)  # a retry of rep-b: the same GPU, no sharing
    started += [second, again]
    assert lines_of(again)[0] == "cuda=GPU-bbbb nvidia=GPU-bbbb" and again.notice is None  # type: ignore[attr-defined]
    first.stop()
    late = host.start(job("rep-c"), time_scale=1)
    started.append(late)
    assert lines_of(late)[0] == "cuda=GPU-aaaa nvidia=GPU-aaaa" and late.notice is None  # type: ignore[attr-defined]


def test_a_cpu_replica_and_a_host_without_a_driver_are_left_as_they_were(
    tmp_path: Path, two_gpus: None, started: list[Container], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    host = HostWorkload(workdir=tmp_path / "work")
    cpu = host.start(job("rep-cpu", profile="Consumption"), time_scale=1)
    started.append(cpu)
    assert lines_of(cpu)[:2] == ["cuda= nvidia=", "host nvidia-smi "]  # the host's nvidia-smi, unchanged
    assert host.seats.holders() == {}
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi: no GPUs known, nothing assigned
    bare = HostWorkload(workdir=tmp_path / "bare")
    gpu = bare.start(job("rep-gpu"), time_scale=1)
    started.append(gpu)
    assert lines_of(gpu)[0] == "cuda= nvidia=" and bare.seats.holders() == {}


@pytest.fixture
def host_server(two_gpus: None) -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=0.01, registered=True, workload="host") as server:
        yield server


def test_three_replicas_of_one_execution_on_two_gpus_and_the_shared_one_is_said(
    host_server: EmulatorServer,
) -> None:
    """Through the emulator: an execution of parallelism 3 on the two-GPU host; the third replica's
    system log says it shares a GPU (GpuShared), the other two hold one each."""
    kwargs = {
        "base_url": host_server.endpoint,
        "connection_verify": host_server.ca_bundle,
        "polling_interval": POLL,
    }
    aca = ContainerAppsAPIClient(StaticCredential(host_server.token), host_server.subscription, **kwargs)
    arm = ResourceManagementClient(StaticCredential(host_server.token), host_server.subscription, **kwargs)
    make_rg(arm)
    make_env(aca)
    body = job_body(
        host_server.subscription, "rg-acagpu-t1", "cae-acagpu-t1", command=["sh", "-c", f"{REPORT}; sleep 3"]
    )
    body["properties"]["configuration"]["manualTriggerConfig"] = {
        "parallelism": 3,
        "replicaCompletionCount": 3,
    }
    aca.jobs.begin_create_or_update("rg-acagpu-t1", "shards", body).result()
    aca.jobs.begin_start("rg-acagpu-t1", "shards").result()
    assert host_server.ctx is not None
    state = host_server.ctx.state

    def seen() -> list[str] | None:
        got = [
            r.logs["tester"][0].text for r in state.replicas() if r.owner == "shards" and r.logs.get("tester")
        ]
        return got if len(got) == 3 else None

    firsts = wait_for(seen, timeout=30, what="three replicas' first lines")
    assert sorted(firsts) == [
        "cuda=GPU-aaaa nvidia=GPU-aaaa",
        "cuda=GPU-aaaa nvidia=GPU-aaaa",
        "cuda=GPU-bbbb nvidia=GPU-bbbb",
    ]
    shared = [e for e in list(state.events) if e.app == "shards" and e.reason == "GpuShared"]
    assert len(shared) == 1 and "on ACA each replica has its own" in shared[0].msg


def test_a_fan_out_whose_shards_shared_a_gpu_says_so(host_server: EmulatorServer, tmp_path: Path) -> None:
    """Three shards at once on the two-GPU host: one shares a GPU (GpuShared), and the run's document
    and its last lines say the shards shared one, since their timings are not a GPU each's."""
    shell = (
        os.environ
        | host_server.client_env()
        | {
            "ACAGPU_POLLING_INTERVAL": "0.1",
            "ACAGPU_CACHE_DIR": str(tmp_path / "cache"),
        }
    )
    shell.pop("ACAGPU_ENV", None)
    args = ["run", "--shards", "3", "--parallel", "3", "--gpu", "a100", "--yes", "-o", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "aca_gpu", *args, "nvidia/cuda:12.4.1-base-ubuntu22.04", "--", "sleep", "1"],
        env=shell,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    said = [w for w in doc["warnings"] if "shared a GPU with another shard (GpuShared)" in w]
    assert len(said) == 1 and said[0].startswith("1 shard replica(s)") and "on ACA each" in said[0]
    assert "  warning: 1 shard replica(s) shared a GPU" in render_fanout(doc)  # the run's last lines
