"""Cold start of `acagpu --help`: median of N fresh interpreter runs, with and without the Azure SDK.

The CLI group imports command modules lazily and no command imports azure.* at module level, so
`--help` pays only for click and acagpu's own small modules. The second figure shows what an eager
Azure import would cost, as the ratio that the lazy design saves.

Usage: python benchmarks/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _time(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    help_cmd = [py, "-c", "from aca_gpu.cli import main; main(['--help'])"]
    bare = [py, "-c", "pass"]
    eager = [
        py,
        "-c",
        "import azure.identity, azure.mgmt.appcontainers, azure.mgmt.resource.resources;"
        "from aca_gpu.cli import main; main(['--help'])",
    ]
    _time(help_cmd, 2)  # warm the page cache and .pyc files: we measure interpreter start, not disk
    results = {
        name: _time(cmd, args.runs)
        for name, cmd in (
            ("python -c pass", bare),
            ("acagpu --help", help_cmd),
            ("eager azure + --help", eager),
        )
    }
    print(f"runs per command: {args.runs}")
    for name, samples in results.items():
        median_ms, min_ms = statistics.median(samples) * 1000, min(samples) * 1000
        print(f"{name:<22} median {median_ms:7.1f} ms   min {min_ms:7.1f} ms")
    lazy = statistics.median(results["acagpu --help"])
    eager_med = statistics.median(results["eager azure + --help"])
    print(f"eager/lazy ratio: {eager_med / lazy:.2f}x")


if __name__ == "__main__":
    main()
