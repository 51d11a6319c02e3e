"""A fan-out's end: every shard and attempt, one exit code, one JSON document.

Exit codes (docs/fanout.md): 0 only when every shard succeeded. acagpu's own codes come first, as
for every run (130 Ctrl-C, 2/3 refused before anything ran, 6 something left behind). Then the
shards: 7 when the platform failed a shard past its retries (never placed, lost, ...), 4 when every
such shard was one that never started before --start-timeout, else 1 when a shard's own container
failed (its exit codes are in the document and the last line). A shard's exit code is never
acagpu's: with N shards there is no one code to pass on, and 3 from a shard must not read as
"quota".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError, InfraError, WaitTimedOut
from aca_gpu.units import gpu_seconds_text, usd_text
from aca_gpu.workflow.engine import lifetime
from aca_gpu.workflow.engine.core import RUN_REMOVED
from aca_gpu.workflow.engine.task_records import PLATFORM, REMOVED, USER, TaskState
from aca_gpu.workflow.fanout.spec import FanoutSpec
from aca_gpu.workflow.workload.outcome import WorkloadOutcome
from aca_gpu.workflow.workload.plan import replica_price

WAIT_CODES = ("NeverPlaced", "PullStalled")
# not failures: a shard Ctrl-C stopped while it ran, and one that never started because of it
UNFINISHED = ("stopped", "cancelled")


@dataclass
class FanoutOutcome(WorkloadOutcome):
    fanout: FanoutSpec | None = None
    states: list[TaskState] = field(default_factory=list)
    clamp: dict[str, Any] | None = None
    pacing: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] | None = None  # what --output-dir downloaded (or why not)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the run did not fail on but must say
    board: Any = None  # the live Board: each shard's last lines

    # -- the shards' verdict ------------------------------------------------------------------
    def failed(self) -> list[TaskState]:
        return [s for s in self.states if s.state != "succeeded" and s.state not in UNFINISHED]

    def unfinished(self) -> list[TaskState]:
        """Stopped or never started by a Ctrl-C: `--rerun-failed` runs them again, but they are
        no shard's failure (not in `failed_indexes`, not counted as failed)."""
        return [s for s in self.states if s.state in UNFINISHED]

    def shards_error(self) -> AcaGpuError | None:
        failed = self.failed()
        if not self.states and self.fanout is not None and self.fanout.indexes:
            return None
        if not failed:
            return None
        platform = [s for s in failed if s.current is not None and s.current.fault == PLATFORM]
        names = ", ".join(_what(s) for s in failed[:20]) + (" ..." if len(failed) > 20 else "")
        message = f"{len(failed)} of {len(self.states)} shards failed: {names}"
        hint = f"acagpu run --rerun-failed {self.plan.run_id}"
        if platform:
            if all((s.current.reason or "").split(":")[0] in WAIT_CODES for s in platform if s.current):
                return WaitTimedOut(message, code="ShardsNeverStarted", hint=hint)
            return InfraError(message, code="ShardsFailedByPlatform", hint=hint)
        return AcaGpuError(message, code="ShardsFailed", hint=hint)  # exit 1: EXIT_FAILURE

    @property
    def exit_code(self) -> int:
        if self.interrupted or self.error is not None or not self.teardown.clean:
            return super(WorkloadOutcome, self).exit_code
        error = self.shards_error() or self.outputs_error()
        if error is not None:
            return error.exit_code
        if not self.states:  # the work never ran (an error the engine caught in the pair)
            return super(WorkloadOutcome, self).exit_code
        return 0

    def failure(self) -> AcaGpuError | None:
        if self.interrupted or self.error is not None or not self.teardown.clean:
            return super(WorkloadOutcome, self).failure()
        return (
            self.shards_error()
            or self.outputs_error()
            or (None if self.states else super(WorkloadOutcome, self).failure())
        )

    def outputs_error(self) -> AcaGpuError | None:
        """`--output-dir` files that did not arrive: the shards' work is done and on the share, but a
        script reading DIR must not take exit 0 for "everything is here" (exit 7)."""
        if not self.outputs or not self.outputs.get("error"):
            return None
        out = self.outputs
        hint = None
        if out.get("account"):  # what is on the share can still be fetched (Azure CLI)
            hint = (
                f"az storage file download-batch --account-name {out['account']} --source {out['share']}"
                f" --pattern '{out['folder']}/*' --destination {out['dir']}"
            )
        return InfraError(f"outputs: {out['error']}", code="OutputsNotDownloaded", hint=hint)

    @property
    def status(self) -> str:
        code = self.exit_code
        if code == 0:
            return "ok"
        if self.failed() and not self.interrupted and self.error is None:
            return "shards_failed"
        return super().status

    def cap_summary(self) -> tuple[str, str, str | None]:
        """--max-cost: which shards succeeded, which were stopped or never started; the rerun."""
        rerun = f"acagpu run --rerun-failed {self.plan.run_id} --max-cost USD"
        if not self.states:  # the engine's word, before the runner's states are read
            return ("the running shards are stopped at the cap", "the shards not started", rerun)
        done = [s.task.index for s in self.states if s.state == "succeeded"]
        stopped = [s.task.index for s in self.states if s.state == "stopped"]
        waiting = [s.task.index for s in self.states if s.state not in ("succeeded", "stopped")]
        return (
            f"{len(done)} of {len(self.states)} shards succeeded ({_indexes(done)})",
            f"{len(stopped)} stopped ({_indexes(stopped)}), {len(waiting)} not run or failed "
            f"({_indexes(waiting)})",
            rerun,
        )

    # -- cost ---------------------------------------------------------------------------------
    def per_second(self) -> float:
        assert self.fanout is not None
        work = self.fanout.run.workload
        price, _ = replica_price(self.plan.pairs[0].profile, work.cpu, work.memory_gib, self.plan.location)
        return price

    def cost(self) -> dict[str, Any]:
        if self.fanout is None:
            return super().cost()
        gpus = self.plan.pairs[0].profile.gpu_count
        per_s = self.per_second()
        replica_s = sum(s.gpu_seconds for s in self.states)
        return {
            "gpu_seconds": round(replica_s * gpus, 3),
            "replica_seconds": round(replica_s, 3),
            "usd_estimate": round(per_s * replica_s, 6),
            "basis": "estimate: every attempt's measured replica lifetime x the replica's price",
            **lifetime.summary(self.gpu_lives),
        }

    # -- the document -------------------------------------------------------------------------
    def shard_docs(self) -> list[dict[str, Any]]:
        assert self.fanout is not None
        per_s = self.per_second()
        board = self.board
        found = []
        for s in sorted(self.states, key=lambda s: s.task.index):
            last = s.current
            doc: dict[str, Any] = {
                "index": s.task.index,
                "status": s.state,
                "fault": last.fault if last and s.state != "succeeded" else None,
                "exit_code": last.exit_code if last else None,
                "reason": last.reason if last and s.state != "succeeded" else None,
                "attempts": [a.as_dict() for a in s.attempts],
                "user_retries": s.user_retries,
                "platform_retries": s.platform_retries,
                "gpu_seconds": round(s.gpu_seconds, 3),
                "usd_estimate": round(s.gpu_seconds * per_s, 6),
                "output_path": self._output_path(s.task.index),
            }
            if self.fanout.items is not None:
                doc["item"] = self.fanout.items[s.task.index]
            console = board.consoles.get(s.task.index) if board is not None else None
            if console is not None:
                doc["output_tail"] = list(console.tail)
                doc["notes"] = list(console.notes)
            found.append(doc)
        return found

    def _output_path(self, index: int) -> str | None:
        assert self.fanout is not None
        if self.fanout.output_dir is None:
            return None
        return str(self.fanout.output_dir / str(index))

    def document(self) -> dict[str, Any]:
        assert self.fanout is not None and self.spec is not None
        error = self.failure()
        failed = self.failed()
        counts: dict[str, int] = {}
        for s in self.states:
            counts[s.state] = counts.get(s.state, 0) + 1
        attempts = [a for s in self.states for a in s.attempts]
        doc: dict[str, Any] = {
            "schema": 1,
            "command": "run",
            "mode": "fanout",
            "run_id": self.plan.run_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "exit_code_from": "acagpu",
            **self.spec.as_dict(),
            **self.fanout.as_dict(),
            "parallel": {
                "asked": self.fanout.parallel,
                "used": (self.clamp or {}).get("parallel"),
                "quota": self.clamp,
            },
            "summary": {
                # every shard asked for, also when none started (the job's create failed)
                "shards": len(self.states) or len(self.fanout.indexes),
                **counts,
                "failed": len(failed),
                "failed_indexes": [s.task.index for s in failed],
                "unfinished_indexes": [s.task.index for s in self.unfinished()],
                "attempts": len(attempts),
                "platform_retries": sum(s.platform_retries for s in self.states),
                "user_retries": sum(s.user_retries for s in self.states),
            },
            "shards": self.shard_docs(),
            "pacing": dict(self.pacing),
            "outputs": self.outputs,
            "phases": dict(self.phases),
            "timings": dict(self.timings),
            "cost": self.cost(),
            "teardown": self.teardown.as_dict(),
            "attempts": [a.as_dict() for a in self.attempts],
            # what was said before the run (the spec's) and after it (e.g. shards that shared a GPU)
            "warnings": list(dict.fromkeys([*self.spec.warnings, *self.fanout.warnings, *self.warnings])),
            "errors": self.errors[-20:],
            "error": error.as_dict() if error is not None else None,
        }
        if self.capacity_wait is not None:
            doc["capacity_wait"] = self.capacity_wait
        if self.cost_cap is not None:
            doc["cost_cap"] = self.cost_cap
        return doc


def _indexes(found: list[int]) -> str:
    """`0-4, 7, 9-12`: shard indexes as ranges (the first 12 ranges)."""
    ranges: list[list[int]] = []
    for index in sorted(found):
        if ranges and ranges[-1][1] + 1 == index:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:12]]
    return (", ".join(text) + (" ..." if len(ranges) > 12 else "")) or "none"


def _what(state: TaskState) -> str:
    last = state.current
    if state.state == "cancelled" or last is None:
        return f"[{state.task.index}] not run"
    if state.state == "stopped":
        return f"[{state.task.index}] stopped"
    if last.fault == USER and last.exit_code is not None:
        return f"[{state.task.index}] exit {last.exit_code}"
    return f"[{state.task.index}] {last.reason or state.state}"


def render_fanout(doc: dict[str, Any]) -> str:
    """The last lines on a terminal: counts, failed shards with their codes, cost, what next."""
    s = doc["summary"]
    lines = [
        f"run {doc['run_id']}: {s.get('succeeded', 0)} of {s['shards']} shards succeeded"
        f" ({s['attempts']} attempts; {s['platform_retries']} platform retries, {s['user_retries']} retries)"
    ]
    for shard in doc["shards"]:
        if shard["status"] == "succeeded":
            continue
        whose = {"user": "the container", "platform": "the platform"}.get(shard["fault"] or "", "")
        code = f"exit {shard['exit_code']}" if shard["exit_code"] is not None else "no exit code"
        if shard["status"] == "cancelled" and shard["exit_code"] is None:  # docs/fanout.md
            removed = (doc.get("error") or {}).get("code") in (REMOVED, RUN_REMOVED)
            code = f"never started ({'the run was removed' if removed else 'Ctrl-C came first'})"
        why = f"; {shard['reason']}" if shard.get("reason") else ""
        lines.append(f"  [{shard['index']}] {shard['status']}: {code}{why}"
                     + (f" ({whose}'s failure)" if whose else ""))  # fmt: skip
    cost = doc["cost"]
    lines.append(
        f"  cost ≈ {usd_text(cost['usd_estimate'])} for {gpu_seconds_text(cost['gpu_seconds'])} (estimate)"
    )
    said = lifetime.quality_text(cost)  # a figure faults spoiled says so
    if said:
        lines.append(f"    {said}")
    if doc.get("outputs"):
        out = doc["outputs"]
        lines.append(f"  outputs: {out.get('files', 0)} files in {out.get('dir')}"
                     + (f"; {out['error']}" if out.get("error") else ""))  # fmt: skip
    lines += [f"  warning: {w}" for w in doc.get("warnings") or []]
    teardown = doc["teardown"]
    lines.append(f"  teardown: {teardown.get('status')}")
    if doc["summary"]["failed_indexes"] and doc["exit_code"] not in (0, 130):
        lines.append(f"  failed shards: {','.join(map(str, doc['summary']['failed_indexes']))} "
                     f"(acagpu run --rerun-failed {doc['run_id']})")  # fmt: skip
    return "\n".join(lines)
