"""A fan-out from Python, as an Airflow or Prefect task would run it.

    python examples/orchestrator.py --env lab --image ghcr.io/me/worker:1

One shard per item: each gets its item as `ACAGPU_ITEM` (and its index as `ACAGPU_SHARD_INDEX`),
prints its answer, and the results come back in item order. The script fails (exit 1) naming the
items whose shards failed, which is what an orchestrator's task should do so that its own retry
or alert takes over. Settings come from the usual places (`ACAGPU_*`, the config file
`~/.config/acagpu/config.toml`: docs/cli.md); against `acagpu emulator serve`, source its env file
first.
"""

from __future__ import annotations

import argparse
import sys

import acagpu

ITEMS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
# what each shard runs: a line naming its item (a real task would embed, evaluate or render it)
SHARD = 'echo "done:$ACAGPU_ITEM"'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="a warm environment (`acagpu env create NAME`)")
    parser.add_argument("--image", default="busybox", help="any image with a POSIX shell")
    parser.add_argument("--parallel", type=int, default=3)
    args = parser.parse_args()

    result = acagpu.map(
        args.image,
        ITEMS,
        command=["sh", "-c", SHARD],
        env=args.env,
        parallel=args.parallel,
        retries=1,  # the container's own failure is retried once; the platform's never count
    )
    for shard in result.shards:  # in item order
        answer = shard.output_tail[-1] if shard.output_tail else ""
        state = "ok" if shard.ok else f"failed (exit {shard.exit_code})"
        print(shard.index, shard.item, state, answer)
    if not result.ok:
        failed = [ITEMS[i] for i in result.failed]
        print(f"failed items: {', '.join(failed)} (exit {result.exit_code})", file=sys.stderr)
        return 1
    print(f"all {len(result.shards)} items done; cost ≈ {result.cost_text} ({result.gpu_seconds_text})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
