"""GPU-seconds under faults: a `run` and a two-shard fan-out through the fault proxy, set beside what
the emulator billed, with how the document says each figure was known.

Usage: python benchmarks/gpu_seconds_under_faults.py [--scenarios none,cut,list503,listlat,both]
                                                      [--seconds 1]

`emulator serve` (time scale 0.002) with the chaos proxy in front (tests/chaos/proxy.py), a warm
environment `lab`, polling 1 s; per scenario one `acagpu run --env lab -- sh -c 'sleep S'` and one
`--shards 2` of it. Scenarios: `cut` every log stream cut before its first line (7 in 10, seeded),
`list503` GETs of executions answered 503 (6 in 10), `listlat` 2 s added to half of them, `both`
cut and slow. Prints per run: the figure (`cost.gpu_seconds`), the bill (`/_emulator/billing`, wall
seconds), the difference and `cost.gpu_seconds_quality`. Real processes throughout; a scenario with
503s spends ~50 s in the SDK's back-off.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.serving import emulator_get, serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]
CUT = {"fault": "stream_cut", "path": "logstream", "after_lines": 0, "count": 0, "rate": 0.7}
SLOW = {"fault": "latency", "method": "GET", "path": "/executions", "seconds": 2.0, "count": 0, "rate": 0.5}
SCENARIOS = {
    "none": [],
    "cut": [CUT],
    "list503": [
        {"fault": "status", "method": "GET", "path": "/executions", "status": 503, "count": 0, "rate": 0.6}
    ],
    "listlat": [SLOW],
    "both": [CUT, SLOW],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve_behind_proxy(Path(tmp)) as (emu, proxy, shell):
        shell = shell | {"ACAGPU_CACHE_DIR": str(Path(tmp) / "cache"), "ACAGPU_POLLING_INTERVAL": "1"}
        shell["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        made = subprocess.run([*ACAGPU, "env", "create", "lab", "--gpu", "t4", "--yes"], env=shell,
                              capture_output=True, text=True)  # fmt: skip
        if made.returncode:
            raise SystemExit(made.stderr[-800:])
        print("scenario  kind    figure  billed  diff %  quality")
        number = 0
        for name in args.scenarios.split(","):
            for kind, extra in (("run", []), ("shards", ["--shards", "2"])):
                number += 1
                rid = f"b{number}"
                proxy.set_rules({"seed": number, "rules": SCENARIOS[name]})
                done = subprocess.run(
                    [*ACAGPU, "run", "-o", "json", "--env", "lab", "--yes", "--run-id", rid, *extra,
                     "--max-minutes", "600", "nvidia/cuda:12.4.1-base-ubuntu22.04", "--", "sh", "-c",
                     f"sleep {args.seconds:g}"],
                    env=shell, capture_output=True, text=True,
                )  # fmt: skip
                proxy.set_rules({"rules": []})
                rows = [r for r in emulator_get(emu, "billing")["replicas"] if r["run_id"] == rid]
                billed = sum(r["wall_seconds"] * r["gpus"] for r in rows)
                try:
                    cost = json.loads(done.stdout)["cost"]
                except (ValueError, KeyError):
                    print(f"{name:9} {kind:6} exit {done.returncode}: no document")
                    continue
                figure = float(cost["gpu_seconds"])
                diff = 100 * (figure - billed) / billed if billed else float("nan")
                print(f"{name:9} {kind:6} {figure:7.3f} {billed:7.3f} {diff:+6.0f}  "
                      f"{cost.get('gpu_seconds_quality', '(not said)')}", flush=True)  # fmt: skip
                for note in cost.get("gpu_seconds_notes") or []:
                    print(f"    {note}")


if __name__ == "__main__":
    main()
