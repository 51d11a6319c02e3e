"""The Python API: `acagpu.run(...)` and `acagpu.map(...)`, typed results, the CLI's own engine.

    import acagpu
    result = acagpu.map("ghcr.io/me/embed:1", ["a.txt", "b.txt"], command=["python", "embed.py"],
                        env="lab", parallel=8, retries=1)
    for shard in result.shards:          # in item order
        print(shard.item, shard.exit_code, shard.output_path, shard.gpu_seconds, shard.cost_text)
    print(result.cost_text, result.gpu_seconds_text)   # money as the CLI prints it: `$0.0022`
    result.raise_for_failures()          # FanoutFailed naming the failed indexes

Both build the same RunRequest and FanoutSpec the CLI builds (bad input raises `BadInput` before
anything exists) and call the same `run_fanout`; settings come from the same places (`ACAGPU_*`
variables, the config file). Nothing is printed unless `echo=True` (then the shards' lines and the
table go to stderr, as on a terminal). A fan-out is never left running: the engine's teardown runs
before the call returns, also when it raises.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from aca_gpu.errors import AcaGpuError
from aca_gpu.output import Output
from aca_gpu.units import usd_text
from aca_gpu.workflow.base.api import RunResult, container_fields, item_texts, run_fields


@dataclass(frozen=True)
class AttemptResult:
    attempt: int
    execution: str | None
    status: str
    fault: str | None  # "user" (the container failed) | "platform" (ACA failed it) | None
    exit_code: int | None
    reason: str | None
    seconds: float
    gpu_seconds: float
    start_s: float | None = None  # start request to a running container
    # other executions ARM made of this attempt's one start (stopped if they still ran): see
    # docs/fanout.md, "Matching executions to shards"
    extra_executions: tuple[str, ...] = ()
    started_at: float | None = None  # the start request on the wall clock (epoch seconds)


@dataclass(frozen=True)
class ShardResult:
    index: int
    status: str  # succeeded | failed | stopped (by Ctrl-C while it ran) | cancelled
    exit_code: int | None
    item: str | None = None
    attempts: tuple[AttemptResult, ...] = ()
    output_path: Path | None = None
    gpu_seconds: float = 0.0
    cost_usd: float = 0.0
    output_tail: tuple[str, ...] = ()  # the container's last lines (acagpu's own words are `notes`)
    notes: tuple[str, ...] = ()  # what acagpu said of the output, e.g. lines read from Log Analytics

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    @property
    def cost_text(self) -> str:
        """`cost_usd` as acagpu prints money everywhere (`$0.03`, `$0.0022`, `<$0.0001`)."""
        return usd_text(self.cost_usd)


class FanoutFailed(AcaGpuError):
    """Raised by `FanoutResult.raise_for_failures` (exit code as the CLI's)."""


@dataclass(frozen=True)
class FanoutResult(RunResult):
    run_id: str
    exit_code: int
    status: str
    shards: tuple[ShardResult, ...]
    cost_usd: float
    gpu_seconds: float
    error: dict[str, Any] | None = None
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    failure: ClassVar[type[AcaGpuError]] = FanoutFailed
    failure_code: ClassVar[str] = "ShardsFailed"

    @property
    def failed(self) -> list[int]:
        return [s.index for s in self.shards if not s.ok]


def _result(doc: dict[str, Any]) -> FanoutResult:
    shards = []
    for s in doc.get("shards") or []:
        attempts = tuple(
            AttemptResult(**{**a, "extra_executions": tuple(a.get("extra_executions") or ())})
            for a in s["attempts"]
        )
        shards.append(
            ShardResult(
                index=s["index"],
                status=s["status"],
                exit_code=s["exit_code"],
                item=s.get("item"),
                attempts=attempts,
                output_path=Path(s["output_path"]) if s.get("output_path") else None,
                gpu_seconds=s["gpu_seconds"],
                cost_usd=s["usd_estimate"],
                output_tail=tuple(s.get("output_tail") or ()),
                notes=tuple(s.get("notes") or ()),
            )
        )
    return FanoutResult(shards=tuple(sorted(shards, key=lambda s: s.index)), **run_fields(doc))


def run(
    image: str,
    command: Sequence[str] = (),
    *,
    shards: int | None = None,
    items: Iterable[Any] | None = None,
    env: str | None = None,
    parallel: int | None = None,
    retries: int = 0,
    retry_on_exit: Sequence[int] = (),
    platform_retries: int = 3,
    output_dir: str | Path | None = None,
    gpu: str | None = None,
    location: str | None = None,
    max_minutes: int | None = None,
    start_timeout: str | None = None,
    env_vars: dict[str, str] | None = None,
    secret_env: Sequence[str] = (),
    cpu: float | None = None,
    memory: str | None = None,
    mounts: Sequence[str] = (),
    run_id: str | None = None,
    echo: bool = False,
    regions: str | Sequence[str] | None = None,
    wait_for_capacity: str | None = None,
    max_cost: float | None = None,
) -> FanoutResult:
    """Run IMAGE (and COMMAND) as `shards` executions (or one per item of `items`) on ACA GPUs.

    `regions` (a list, or "eastus,westus3") are tried in order; `wait_for_capacity` ("2h") sweeps
    them again while none has capacity, as `acagpu run --wait-for-capacity` does; `max_cost` (USD)
    caps what the run spends, as `--max-cost` does."""
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import Waiter, open_cloud, resolve_owner
    from aca_gpu.workflow.fanout.run import run_fanout
    from aca_gpu.workflow.fanout.spec import make_fanout
    from aca_gpu.workflow.workload.plan import RunRequest, capped, make_run_spec

    listed = item_texts(items) if items is not None else None
    container = container_fields(image, command, env=env, env_vars=env_vars, secret_env=secret_env,
                                 mounts=mounts, cpu=cpu, memory=memory)  # fmt: skip
    request = RunRequest(
        **container,
        gpu=gpu,
        location=location,
        run_id=run_id,
        max_minutes=max_minutes,
        start_timeout=start_timeout,
        regions=regions if regions is None or isinstance(regions, str) else ",".join(regions),
        wait_for_capacity=wait_for_capacity,
    )
    settings = load_settings()
    spec = capped(make_run_spec(settings, request, owner=resolve_owner(settings)), max_cost)
    fanout = make_fanout(
        spec,
        shards=shards,
        map_file=None,
        items=listed,
        parallel=parallel,
        retries=retries,
        retry_on_exit=",".join(str(c) for c in retry_on_exit) or None,
        platform_retries=platform_retries,
        logs="all",  # printed only with echo; each shard's last lines are kept either way
        output_dir=str(output_dir) if output_dir is not None else None,
    )
    sink = sys.stderr if echo else io.StringIO()
    output = Output("table" if echo else "json", stdout=sink, stderr=sink, command="run")
    outcome = run_fanout(
        open_cloud(settings), fanout, output, Waiter(interval=settings.polling_interval), request=request
    )
    return _result(outcome.document())


def map(image: str, items: Iterable[Any], command: Sequence[str] = (), **options: Any) -> FanoutResult:
    """One shard per item (`ACAGPU_ITEM`; non-strings as JSON); results in item order. The name
    shadows the builtin on purpose: `acagpu.map` reads as Modal's and Python's own `map`."""
    return run(image, command, items=list(items), **options)
