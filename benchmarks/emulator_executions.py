"""What many executions cost the emulator itself: N played executions of one job, P at a time, against
`acagpu emulator serve` in its own process; its CPU seconds per execution and its peak memory.

    python benchmarks/emulator_executions.py                       # N=1000, P=50, aca-2026 durations
    python benchmarks/emulator_executions.py -n 200 -p 20 --seconds 60 --time-scale 0.05

The driver is deliberately plain (the real SDK, a start whenever fewer than P run, a listing every
`--poll` s), so the figure is the server's: its `/proc/<pid>/stat` user and system time, with the
children it waited for (`podman image exists`), before and after the executions, over N. Each
execution is a played job (not Podman, not `sh -c`): its env carries ACAGPU_EMULATOR_SECONDS, so it
runs that many emulated seconds and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azure.core.credentials import AccessToken  # noqa: E402
from azure.mgmt.appcontainers import ContainerAppsAPIClient  # noqa: E402
from azure.mgmt.resource.resources import ResourceManagementClient  # noqa: E402

IMAGE = "mcr.microsoft.com/k8se/quickstart-jobs:latest"  # played: no Podman image, no sh -c line
RG, ENV, JOB = "rg-bench", "cae-bench", "fan"


class Token:
    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # its own user and system time, and that of the children it waited for (`podman image exists`)
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _read_env(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.removeprefix("export ").split("=", 1)
            found[key] = value.strip("'\"")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("-p", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="emulated seconds each execution runs")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--poll", type=float, default=0.5, help="wall seconds between listings")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-executions-"))
    env_file = work / "emu.env"
    faults = f"quota:region=eastus,limit={args.p + 10}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aca_gpu",
            "emulator",
            "serve",
            "--durations",
            "aca-2026",
            "--time-scale",
            str(args.time_scale),
            "--faults",
            faults,
            "--env-file",
            str(env_file),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while not env_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        emu = _read_env(env_file)
        kwargs: dict[str, Any] = {
            "base_url": emu["ACAGPU_ARM_ENDPOINT"],
            "connection_verify": emu["ACAGPU_CA_BUNDLE"],
            "polling_interval": 0.05,
        }
        cred, sub = Token(emu["ACAGPU_TOKEN"]), emu["ACAGPU_SUBSCRIPTION"]
        arm = ResourceManagementClient(cred, sub, **kwargs)  # type: ignore[arg-type]
        aca = ContainerAppsAPIClient(cred, sub, **kwargs)  # type: ignore[arg-type]
        arm.providers.register("Microsoft.App")
        while arm.providers.get("Microsoft.App").registration_state != "Registered":
            time.sleep(0.1)
        arm.resource_groups.create_or_update(RG, {"location": "eastus"})
        gpu = {"name": "gpu", "workloadProfileType": "Consumption-GPU-NC8as-T4"}
        aca.managed_environments.begin_create_or_update(
            RG, ENV, {"location": "eastus", "properties": {"workloadProfiles": [gpu]}}
        ).result()
        env_id = f"/subscriptions/{sub}/resourceGroups/{RG}/providers/Microsoft.App/managedEnvironments/{ENV}"
        container = {"name": "main", "image": IMAGE, "resources": {"cpu": 8, "memory": "56Gi"}}
        job = {
            "location": "eastus",
            "properties": {
                "environmentId": env_id,
                "workloadProfileName": "gpu",
                "configuration": {
                    "triggerType": "Manual",
                    "replicaTimeout": 3600,
                    "replicaRetryLimit": 0,
                    "manualTriggerConfig": {"parallelism": 1, "replicaCompletionCount": 1},
                },
                "template": {"containers": [container]},
            },
        }
        aca.jobs.begin_create_or_update(RG, JOB, job).result()  # type: ignore[call-overload]
        cpu0, began = _cpu_s(server.pid), time.monotonic()
        started, running, done, listings = 0, 0, 0, 0
        while done < args.n:
            while running < args.p and started < args.n:
                env = [{"name": "ACAGPU_EMULATOR_SECONDS", "value": str(args.seconds)},
                       {"name": "ACAGPU_SHARD_INDEX", "value": str(started)}]  # fmt: skip
                aca.jobs.begin_start(RG, JOB, template={"containers": [{**container, "env": env}]}).result()  # type: ignore[call-overload]
                started, running = started + 1, running + 1
            time.sleep(args.poll)
            statuses = [str(getattr(e.status, "value", e.status)) for e in aca.jobs_executions.list(RG, JOB)]
            listings += 1
            done = sum(s in ("Succeeded", "Failed", "Stopped", "Degraded") for s in statuses)
            running = started - done
        wall = time.monotonic() - began
        cpu = _cpu_s(server.pid) - cpu0
        print(
            json.dumps(
                {
                    "n": args.n,
                    "p": args.p,
                    "seconds": args.seconds,
                    "time_scale": args.time_scale,
                    "wall_s": round(wall, 1),
                    "listings": listings,
                    "server_cpu_s": round(cpu, 2),
                    "server_cpu_ms_per_execution": round(1000 * cpu / args.n, 1),
                    "server_cpu_share_of_wall": round(cpu / wall, 3),
                    "server_peak_rss_mib": round(_rss_mib(server.pid), 1),
                },
                indent=1,
            )
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
