"""What a fan-out is asked to do, checked before anything exists (bad input: exit 2, one line).

A fan-out is `acagpu run` times N: the same RunSpec (image, command, size, place), plus the shards
(N, or one per item of `--map`), the concurrency P, the retry policy, where outputs go and how
logs show. Shard k's execution gets `ACAGPU_SHARD_INDEX=k`, `ACAGPU_SHARD_COUNT=N`,
`ACAGPU_ATTEMPT` (1, 2, ... per shard), `ACAGPU_ITEM` (with --map) and `ACAGPU_OUTPUT_DIR`
(with --output-dir) in its own template env: ACA gives a job replica no index of its own.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.workflow.engine.executions import ATTEMPT_TOKEN
from aca_gpu.workflow.engine.task_records import RetryPolicy, Task
from aca_gpu.workflow.workload.plan import Mount, RunSpec

INDEX, COUNT, ATTEMPT, ITEM = "ACAGPU_SHARD_INDEX", "ACAGPU_SHARD_COUNT", "ACAGPU_ATTEMPT", "ACAGPU_ITEM"
TOKEN = ATTEMPT_TOKEN  # matches an execution to its shard's attempt, read back from the execution
OUTPUT_DIR = "ACAGPU_OUTPUT_DIR"
RUN_ID = "ACAGPU_RUN_ID"
MAX_SHARDS = 10_000  # as Cloud Run jobs' tasks and AWS Batch array jobs (both documented at 10,000)
MAX_ITEM_BYTES = 32 * 1024  # acagpu's own bound for one env value (ACA publishes none: UNCONFIRMED)
RESULTS_SHARE = "acagpu-results"  # the environment's Azure Files share that --output-dir uses
RESULTS_PATH = "/acagpu/output"  # where it is mounted; shard k writes into <run>/<k> of it
LOGS = ("all", "failed", "none")
DEFAULT_PLATFORM_RETRIES = 3
DEFAULT_PARALLEL = 10


@dataclass(frozen=True)
class FanoutSpec:
    run: RunSpec
    count: int  # N: the shards of the whole fan-out (ACAGPU_SHARD_COUNT)
    parallel: int  # P as asked (clamped to the free GPU quota when the run starts)
    policy: RetryPolicy
    logs: str = "all"
    items: tuple[str, ...] | None = None  # --map: item k is shard k's ACAGPU_ITEM
    indexes: tuple[int, ...] = ()  # the shards this run starts (all, or a rerun's failed ones)
    output_dir: Path | None = None
    rerun_of: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def share_subdir(self) -> str:
        return self.run.plan.run_id

    def share_folder(self, index: int) -> str:
        """Shard `index`'s folder on the results share: `<run>/<index>`."""
        return f"{self.share_subdir}/{index}"

    def job_run(self) -> RunSpec:
        """The RunSpec the job is made from: with --output-dir, the results share mounted too."""
        if self.output_dir is None:
            return self.run
        work = self.run.workload
        return replace(self.run, workload=replace(work, mounts=(*work.mounts, results_mount())))

    def tasks(self) -> list[Task]:
        found = []
        for k in self.indexes:
            env = {INDEX: str(k), COUNT: str(self.count), RUN_ID: self.run.plan.run_id}
            if self.items is not None:
                env[ITEM] = self.items[k]
            if self.output_dir is not None:
                env[OUTPUT_DIR] = f"{RESULTS_PATH}/{self.share_folder(k)}"
            found.append(Task(index=k, env=env, label=f"[{k}]"))
        return found

    def price(self) -> dict[str, Any]:
        """Per second of one shard, the ceiling (N x --max-minutes x price) and the wall time at P."""
        one = self.run.price()
        per_s = float(one["usd_per_second"])
        n, minutes = len(self.indexes), self.run.plan.max_minutes
        rounds = math.ceil(n / max(1, self.parallel))
        return {
            "usd_per_second_per_shard": round(per_s, 7),
            "usd_per_second_at_parallel": round(per_s * min(n, self.parallel), 7),
            "ceiling_usd": round(n * minutes * 60 * per_s, 4),
            "ceiling_basis": f"{n} shards x --max-minutes {minutes} x ${per_s:.7f}/s (estimate)",
            "wall_time_ceiling_s": rounds * (self.run.plan.start_timeout_s + minutes * 60),
            "rounds_at_parallel": rounds,
            "basis": one.get("basis"),
            **({"max_cost_usd": one["max_cost_usd"]} if "max_cost_usd" in one else {}),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "shards": {
                "count": self.count,
                "indexes": list(self.indexes) if len(self.indexes) != self.count else "all",
                "started": len(self.indexes),
                "parallel": self.parallel,
                "map": self.items is not None,
                "retries": self.policy.retries,
                "retry_on_exit": sorted(self.policy.retry_on_exit) if self.policy.retry_on_exit else None,
                "platform_retries": self.policy.platform_retries,
                "logs": self.logs,
                "output_dir": str(self.output_dir) if self.output_dir else None,
                "rerun_of": self.rerun_of,
            },
            "fanout_price": self.price(),
        }


def read_items(path: str, *, max_item_bytes: int | None = MAX_ITEM_BYTES) -> tuple[str, ...]:
    """--map FILE: a JSON array (strings, or values written as JSON), else one item per line.
    `max_item_bytes` None: the caller checks sizes itself (queue mode's items travel in messages)."""
    try:
        text = Path(path).read_text(encoding="utf-8") if path != "-" else _stdin()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--map {path}: cannot read it ({exc.__class__.__name__}: {exc})") from exc
    stripped = text.strip()
    items: list[str]
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise BadInput(f"--map {path}: not a valid JSON array ({exc})") from exc
        items = [v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in data]
    else:
        items = [line for line in text.splitlines() if line.strip()]
    if not items:
        raise BadInput(f"--map {path}: no items (give one per line, or a JSON array)")
    for k, item in enumerate(items):
        size = len(item.encode("utf-8"))
        if max_item_bytes is not None and size > max_item_bytes:
            raise BadInput(
                f"--map {path}: item {k} is {size} bytes, over {MAX_ITEM_BYTES} for one env value "
                "(pass a path or a key instead and read the data inside the shard)"
            )
        if "\x00" in item:
            raise BadInput(f"--map {path}: item {k} holds a NUL character, which no env value can")
    if len(items) > MAX_SHARDS:
        raise BadInput(f"--map {path}: {len(items)} items, over {MAX_SHARDS} shards")
    return tuple(items)


def _stdin() -> str:
    import sys

    return sys.stdin.read()


def parse_codes(text: str | None) -> frozenset[int] | None:
    if not text:
        return None
    try:
        codes = frozenset(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise BadInput(f"--retry-on-exit {text!r}: give exit codes separated by commas, e.g. 1,137") from exc
    if not codes or any(not 1 <= c <= 255 for c in codes):
        raise BadInput(f"--retry-on-exit {text!r}: exit codes are 1 to 255")
    return codes


def make_fanout(
    run: RunSpec,
    *,
    shards: int | None,
    map_file: str | None,
    parallel: int | None,
    retries: int = 0,
    retry_on_exit: str | None = None,
    platform_retries: int = DEFAULT_PLATFORM_RETRIES,
    logs: str = "all",
    output_dir: str | None = None,
    items: tuple[str, ...] | None = None,
    indexes: tuple[int, ...] | None = None,
    rerun_of: str | None = None,
) -> FanoutSpec:
    """Every fan-out value checked (BadInput, one line) before anything is created."""
    if shards is not None and (map_file is not None or items is not None):
        raise BadInput("give --shards N or --map FILE, not both (--map makes one shard per item)")
    if shards is not None and not 1 <= shards <= MAX_SHARDS:
        raise BadInput(f"--shards {shards}: use 1 to {MAX_SHARDS}")
    if map_file is not None:
        items = read_items(map_file)
    count = len(items) if items is not None else shards
    if count is None:
        raise BadInput("a fan-out needs --shards N or --map FILE")
    if run.local:
        raise BadInput("--shards/--map run on ACA: leave out --runtime (local runtimes run one container)")
    if parallel is not None and parallel < 1:
        raise BadInput(f"--parallel {parallel}: at least 1")
    if retries < 0:
        raise BadInput(f"--retries {retries}: 0 or more")
    if logs not in LOGS:
        raise BadInput(f"--logs {logs}: choose one of {', '.join(LOGS)}")
    out: Path | None = None
    if output_dir is not None:
        out = Path(output_dir)
        if out.exists() and not out.is_dir():
            raise BadInput(f"--output-dir {output_dir}: exists and is not a folder")
        if run.plan.env is None:
            raise BadInput(
                "--output-dir needs a warm environment (--env NAME): shards write to its Azure Files share"
            )
        check_makeable(out, f"--output-dir {output_dir}")
    chosen = tuple(range(count)) if indexes is None else indexes
    warnings = list(run.warnings)
    return FanoutSpec(
        run=run,
        count=count,
        parallel=parallel if parallel is not None else min(count, DEFAULT_PARALLEL),
        policy=RetryPolicy(
            retries=retries, retry_on_exit=parse_codes(retry_on_exit), platform_retries=platform_retries
        ),
        logs=logs,
        items=items,
        indexes=chosen,
        output_dir=out,
        rerun_of=rerun_of,
        warnings=tuple(warnings),
    )


def check_makeable(folder: Path, said: str) -> None:
    """Refuse a folder the downloads could never write, before the shards run (and bill) for it.

    Missing folders are made and removed again, the nearest existing one must take a new entry:
    a parent that is a file, a read-only file system or a missing permission is found now, not as
    exit 7 after every shard succeeded.
    """
    made: list[Path] = []
    try:
        for path in reversed([folder, *folder.parents]):
            if not path.exists():
                path.mkdir()
                made.append(path)
        probe = folder / f".acagpu-write-check-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as e:
        raise BadInput(f"{said}: cannot write there ({e.strerror or e})") from None
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()


def results_mount() -> Mount:
    return Mount(RESULTS_SHARE, RESULTS_PATH)
