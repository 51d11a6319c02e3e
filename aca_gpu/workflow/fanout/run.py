"""A fan-out from start to end: the engine with the fan-out runtime, then the results.

The engine owns the order, Ctrl-C and teardown (billing first); the fan-out runtime runs the
shards. After teardown (nothing bills any more) `--output-dir` downloads each shard's folder from
the environment's share, and the run's record is saved for `--rerun-failed`.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, TextIO

from aca_gpu.errors import InfraError
from aca_gpu.models import Cloud
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Engine
from aca_gpu.workflow.engine.task_records import REMOVED
from aca_gpu.workflow.fanout import ledger
from aca_gpu.workflow.fanout.live import Board
from aca_gpu.workflow.fanout.outcome import FanoutOutcome
from aca_gpu.workflow.fanout.spec import FanoutSpec
from aca_gpu.workflow.spend import ledger as spend_ledger
from aca_gpu.workflow.workload.masking import masker
from aca_gpu.workflow.workload.outcome import Console
from aca_gpu.workflow.workload.plan import RunRequest, replica_price

WAIT_FOR_SHARDS_S = 30.0  # after Ctrl-C, how long the document waits for the runner's stops


def board_for(fanout: FanoutSpec, output: Output | None) -> Board:
    live = output is not None and not output.is_json
    profile = fanout.run.plan.pairs[0].profile
    work = fanout.run.workload
    try:
        per_s, _ = replica_price(profile, work.cpu, work.memory_gib, fanout.run.plan.location)
    except Exception:  # a profile without a price: the table shows 0
        per_s = 0.0

    def stderr() -> TextIO:
        return output.stderr if output is not None else sys.stderr

    def stdout() -> TextIO:
        return output.stdout if output is not None else sys.stdout

    return Board(
        len(fanout.indexes),
        live=live,
        logs=fanout.logs,
        stdout=stdout,
        stderr=stderr,
        usd_per_gpu_s=per_s,
        terminal=live and stderr().isatty(),
    )


def run_fanout(
    cloud: Cloud,
    fanout: FanoutSpec,
    output: Output,
    waiter: Waiter,
    *,
    request: RunRequest | None = None,
    tick_s: float | None = None,
) -> FanoutOutcome:
    """Run every shard of `fanout`; never raises for the cloud's failures (they are in the outcome)."""
    from aca_gpu.workflow.fanout.aca import fanout_runtime_for

    board = board_for(fanout, output)
    console = Console(False, lambda: output.stdout, lambda: output.stderr)
    console.mask = board.mask = masker(fanout.run.workload.secret_values.values())
    # one listing a second (docs/fanout.md): a look's tick also bounds how well a shard's start is known
    tick = tick_s if tick_s is not None else max(0.5, min(1.0, waiter.interval * 4))
    plan, runtime = fanout_runtime_for(cloud, fanout.run.plan, waiter, fanout, console, board, tick)
    spec = replace(fanout.run, plan=plan)
    fanout = replace(fanout, run=spec)
    runtime.fanout = fanout
    outcome = FanoutOutcome(plan=plan, runtime="aca", spec=spec, console=console, fanout=fanout, board=board)
    Engine(plan, runtime, output, waiter, outcome=outcome).run()
    if runtime.runner is not None and not runtime.done.wait(WAIT_FOR_SHARDS_S):
        outcome.errors.append("the shards' runner had not ended when the run did")
    outcome.states = list(runtime.states)
    cap = plan.spend_cap
    if cap is not None and cap.reached and not outcome.interrupted:  # now the shards are known
        outcome.error = cap.error(*outcome.cap_summary())
    removed = runtime.runner.removed if runtime.runner is not None else None
    if removed is not None and outcome.error is None and not outcome.interrupted:
        outcome.error = InfraError(
            f"run {plan.run_id} was removed while it ran: {removed}",
            code=REMOVED,
            hint="`acagpu down`, reap or the guard deleted it; "
            f"`acagpu run --rerun-failed {plan.run_id}` runs the shards that did not succeed",
        )
    outcome.clamp = runtime.clamp
    outcome.errors += list(runtime.runner.errors) if runtime.runner is not None else []
    outcome.pacing = pacing_of(runtime)
    outcome.warnings += shared_gpu_warnings(getattr(runtime, "gpu_shared", []))
    made = getattr(runtime, "shares_made", None)
    outcome.shares = made.as_dict() if made is not None else None
    if fanout.output_dir is not None and outcome.states:
        from aca_gpu.workflow.fanout.outputs import download

        outcome.outputs = download(cloud, runtime, fanout, outcome, output)
    spend_ledger.record(cloud, outcome)
    if request is not None:
        ledger.save(request, fanout_options(fanout), outcome.document())
    return outcome


def shared_gpu_warnings(notices: list[str]) -> list[str]:
    """One warning when shards shared a GPU (the emulator's host workload, more replicas at once than
    its host has GPUs): their rates and timings are not those of a GPU each, as on ACA."""
    if not notices:
        return []
    return [
        f"{len(notices)} shard replica(s) shared a GPU with another shard (GpuShared): their timings "
        f"are not those of a GPU each, as on ACA; {notices[0]}"
    ]


def pacing_of(runtime: Any) -> dict[str, Any]:
    """Starts and their fastest rate over any 10 s window (the write budget is 10/s + 200)."""
    runner = runtime.runner
    if runner is None:
        return {}
    starts = sorted(runner.started_at)
    peak_10s = 0
    j = 0
    for i, t in enumerate(starts):
        while starts[j] < t - 10.0:
            j += 1
        peak_10s = max(peak_10s, i - j + 1)
    span = (starts[-1] - starts[0]) if len(starts) > 1 else 0.0
    attempts = [a for state in runner.states for a in state.attempts]
    ends = [a.ended for a in attempts if a.ended is not None]
    return {
        # the shards' own wall time: the first start request to the last attempt's end
        "first_start_to_last_end_s": round(max(ends) - starts[0], 3) if ends and starts else None,
        "starts": len(starts),
        "limit": runner.limit,
        "starts_per_s_mean": round(len(starts) / span, 2) if span else None,
        "starts_peak_10s": peak_10s,
        "listings": getattr(runner.backend, "listings", None),
        "write_budget": {"burst": runner.bucket.capacity, "per_s": runner.bucket.refill},
    }


def fanout_options(fanout: FanoutSpec) -> dict[str, Any]:
    """What a rerun needs besides the request: N, the items, the policy, P, logs, outputs."""
    return {
        "count": fanout.count,
        "items": list(fanout.items) if fanout.items is not None else None,
        "parallel": fanout.parallel,
        "retries": fanout.policy.retries,
        "retry_on_exit": ",".join(map(str, sorted(fanout.policy.retry_on_exit)))
        if fanout.policy.retry_on_exit
        else None,
        "platform_retries": fanout.policy.platform_retries,
        "logs": fanout.logs,
        "output_dir": str(fanout.output_dir) if fanout.output_dir else None,
    }
