"""`acagpu serve` of a real model on a real GPU: `acagpu emulator serve --workload host` on a GPU
machine, a warm environment, then `serve --measure N --requests M` of `gpu_model_server.py` (a
PyTorch model, one forward pass per request); then the same model on the CPU, to see `serve` say
that the GPU was left idle. Prints one JSON document (and writes it to `--out`).

The platform's phases run on the emulator's scaled clock (`--time-scale`); the model's load and
every answer are real seconds on this machine (`clock` in each phase says which).

Usage: python3 benchmarks/serve_gpu.py [--time-scale 0.1] [--cycles 3] [--requests 50] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ACAGPU = [sys.executable, "-m", "aca_gpu"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def acagpu(
    env: dict[str, str], *args: str, image: str | None = None, command: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One command's JSON document (`-o json` before IMAGE: what follows IMAGE is its command)."""
    argv = [*ACAGPU, *args, "-o", "json", *((image, "--", *command) if image else ())]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    sys.stderr.write(done.stderr[-3000:])
    doc: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {"exit": done.returncode}
    return doc


def smi() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "no nvidia-smi"
    out = subprocess.run(
        [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-scale", default="0.1")
    parser.add_argument("--cycles", default="3")
    parser.add_argument("--requests", default="50")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--workload", default="host", help="host (a GPU machine) or simulated (a dry run)")
    parser.add_argument("--devices", default="cuda,cpu", help="which runs: the model on cuda, on cpu")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="serve-gpu-"))
    env_file = work / "emu.env"
    env = {**os.environ, "ACAGPU_CACHE_DIR": str(work / "cache"), "ACAGPU_POLLING_INTERVAL": "0.2"}
    env.pop("ACAGPU_CONFIG", None)
    server = subprocess.Popen(
        [*ACAGPU, "emulator", "serve", "--workload", args.workload, "--registered",
         "--time-scale", args.time_scale, "--env-file", str(env_file)],
        env=env, stdout=subprocess.DEVNULL, stderr=open(work / "emulator.log", "w"),  # noqa: SIM115
    )  # fmt: skip
    result: dict[str, Any] = {"host_gpu": smi(), "time_scale": float(args.time_scale)}
    try:
        while not env_file.exists():
            if server.poll() is not None:
                sys.exit((work / "emulator.log").read_text()[-3000:])
            time.sleep(0.2)
        for line in env_file.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value.strip("'")
        acagpu(env, "env", "create", "lab", "--yes")
        script = str(HERE / "gpu_model_server.py")
        runs = (
            ("cuda", "gpu1", ("--measure", args.cycles, "--requests", args.requests)),
            ("cpu", "cpu1", ()),
        )
        for device, run_id, extra in [r for r in runs if r[0] in args.devices.split(",")]:
            port = str(free_port())
            began = time.monotonic()
            doc = acagpu(
                env, "serve", "--env", "lab", "--run-id", run_id, "--port", port, "--cooldown", "20",
                "--load-timeout", "5m", "--yes", *extra,
                image="python:3.12-slim", command=("python3", script, port, "--device", device),
            )  # fmt: skip
            doc["wall_s"] = round(time.monotonic() - began, 2)
            if doc.get("url"):
                import urllib.request

                with urllib.request.urlopen(doc["url"] + "/", timeout=120) as answer:
                    doc["model_answer"] = json.loads(answer.read())
            result[device] = doc
            result[f"{device}_down"] = acagpu(env, "down", "--run-id", run_id, "--yes").get("teardown")
        acagpu(env, "env", "delete", "lab", "--yes")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
