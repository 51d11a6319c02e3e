"""`acagpu run` against the emulator at the aca-2026 durations: what the user waits for, in emulated seconds.

For a `sh -c` line in a CUDA base image (it runs for real in the emulator's sandbox), three flows:
  cold             `acagpu run`: a run-scoped group and environment (GPU profile ~490 s), torn down after
  --env (first)    `acagpu run --env bench`: the run's job only, first pull of the image on the env's nodes
  --env (again)    the same, with the image cached on the environment's nodes
and for each the time to the container's first output line, to its exit code (verdict), to the prompt,
and every step the user sees (preflight, resource group, environment, container, teardown). The warm
environment itself (`acagpu env create`, made once) is timed apart.

Usage: python benchmarks/run_latency.py [--time-scale 0.01] [--poll 0.02] [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from typing import Any

from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.output import NullProgress, Output
from aca_gpu.workflow.base.context import Waiter, open_cloud
from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec
from aca_gpu.workflow.workload.run import run_aca

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
COMMAND = ("sh", "-c", "echo hello from the GPU replica")


def one(cloud: Any, settings: Any, poll: float, scale: float, rid: str, env: str | None) -> dict[str, float]:
    spec = make_run_spec(
        settings, RunRequest(image=IMAGE, command=COMMAND, gpu="t4", run_id=rid, env_name=env), owner="bench"
    )
    output = Output("json", stdout=io.StringIO(), stderr=io.StringIO())
    outcome = run_aca(cloud, spec, output, Waiter(interval=poll))
    doc = outcome.document()
    assert doc["exit_code"] == 0 and doc["output"]["stdout"].startswith("hello"), doc
    row = {
        "first line": (doc["timings"]["time_to_first_line_s"] or 0.0) / scale,
        "exit code": (doc["timings"]["time_to_verdict_s"] or 0.0) / scale,
        "prompt": (doc["timings"]["time_to_prompt_s"] or 0.0) / scale,
    }
    # every step the user sees (the runtime's own: provider, quota, group, environment ...), in order
    row.update({f"step {name}": seconds / scale for name, seconds in output.phases.items()})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--poll", type=float, default=0.02, help="client polling interval (wall seconds)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from aca_gpu.workflow.env import lifecycle

    rows: dict[str, list[dict[str, float]]] = {}
    env_create: list[float] = []
    for i in range(args.runs):
        with EmulatorServer(time_scale=args.time_scale, registered=True, durations="aca-2026") as emu:
            settings = load_settings(
                env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": str(args.poll)}, file={}
            )
            cloud = open_cloud(settings)
            rows.setdefault("cold", []).append(
                one(cloud, settings, args.poll, args.time_scale, f"c{i}", None)
            )
            plan = lifecycle.make_env_plan(
                settings, "bench", location=None, gpus="t4", idle_ttl="1d", owner="bench"
            )
            started = time.monotonic()
            lifecycle.create_env(cloud, plan, NullProgress())
            env_create.append((time.monotonic() - started) / args.time_scale)
            for label, rid in (("--env (first pull)", f"w{i}"), ("--env (cached)", f"x{i}")):
                rows.setdefault(label, []).append(
                    one(cloud, settings, args.poll, args.time_scale, rid, "bench")
                )
    print(f"\nacagpu run at the aca-2026 durations, time scale {args.time_scale}, median of {args.runs}")
    print(
        "(made once, before the warm runs: acagpu env create with a T4 profile "
        f"{statistics.median(env_create):.0f} s)"
    )
    keys = list(dict.fromkeys(k for rs in rows.values() for r in rs for k in r))
    print(f"{'emulated seconds':<22}" + "".join(f"{label:>20}" for label in rows))
    for key in keys:
        cells = []
        for rs in rows.values():
            values = [r[key] for r in rs if key in r]
            cells.append(f"{statistics.median(values):18.0f} s" if values else f"{'-':>20}")
        print(f"{key:<22}" + "".join(cells))
    cold = statistics.median(r["first line"] for r in rows["cold"])
    for label in ("--env (first pull)", "--env (cached)"):
        warm = statistics.median(r["first line"] for r in rows[label])
        print(f"{label} / cold, time to first line: {warm / cold:.2f}")


if __name__ == "__main__":
    main()
