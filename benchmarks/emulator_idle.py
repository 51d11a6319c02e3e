"""What an idle emulator costs: CPU seconds per wall second while nothing is made and no client asks.

    python benchmarks/emulator_idle.py [--seconds 10] [--subscriptions 1 5]

The suite keeps one emulator per worker for its whole run, mostly idle while the worker runs unit
tests, and `acagpu emulator serve` waits in a second shell between commands. Figures: CPU per wall
second quiet, and while a client reads every 0.1 s (the tests' polling), which keeps it ticking fast.
"""

from __future__ import annotations

import argparse
import time

import requests

from aca_gpu.emulator.server import EmulatorServer


def _cpu_per_s(seconds: float, server: EmulatorServer | None = None) -> float:
    started, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - started < seconds:
        if server is not None:
            requests.get(
                f"{server.endpoint}/metadata/endpoints?api-version=2022-09-01",
                verify=server.ca_bundle,
                timeout=10,
            )
        time.sleep(0.1)
    return (time.process_time() - cpu) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--subscriptions", type=int, nargs="+", default=[1, 5])
    args = parser.parse_args()
    print(f"{'subscriptions':>13}  {'quiet CPU/s':>11}  {'polled CPU/s':>12}")
    for count in args.subscriptions:
        with EmulatorServer(time_scale=0.005, workload="simulated", subscriptions=count) as server:
            time.sleep(1.5)  # past the quiet window of its start
            quiet = _cpu_per_s(args.seconds)
            polled = _cpu_per_s(args.seconds, server)
        print(f"{count:>13}  {quiet:>11.4f}  {polled:>12.4f}")


if __name__ == "__main__":
    main()
