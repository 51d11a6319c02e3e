"""`acagpu run --runtime docker|podman|apptainer`: the same workload on this machine's runtime.

The engine's second runtime for a workload: nothing to create or remove (`run --rm`), the
container's lines go to the run's `Console` as they arrive, a deadline (--max-minutes) or Ctrl-C
kills the client and removes the named container. A container the runtime refuses to start is
explained with the runtime's own text (and a fix when `gpu/runtime_errors.py` knows one); an image
it cannot pull is `ImagePullFailed` as for `acagpu local` (exit 2, or 7: `explain.py`), and a
container that crashed at start keeps its own code with the reason beside it (exit 137: memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aca_gpu.errors import WaitTimedOut
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.outcome import ProbeResult, TesterOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.local.place import LocalPlace
from aca_gpu.workflow.workload import explain
from aca_gpu.workflow.workload.outcome import Console, WorkloadResult
from aca_gpu.workflow.workload.plan import RunSpec

if TYPE_CHECKING:
    from aca_gpu.local.probe import LocalTarget
    from aca_gpu.local.runner import ContainerRun


def outcome_of(result: WorkloadResult) -> TesterOutcome:
    """The engine's view: a container that ran passes the pair (its code is the run's exit code)."""
    status = {"exited": "pass", "refused": "fail", "timeout": "timeout"}.get(result.status, "unavailable")
    return TesterOutcome(status, result.execution, None, result.exit_code, result.reason, result.seconds)


class LocalWorkloadRuntime(LocalPlace):
    """Implements the engine's Runtime for one user container on Docker, Podman or Apptainer."""

    def __init__(self, target: LocalTarget, why: str, spec: RunSpec, console: Console) -> None:
        self.target, self.why, self.spec, self.console = target, why, spec, console
        self.name = target.runtime
        self.result: WorkloadResult | None = None
        self.commands: dict[str, str] = {}

    def preflight(self, plan: Plan, progress: Progress) -> None:
        progress.note(self.why)

    def create_place(self, plan: Plan, progress: Progress, resumed: list[str]) -> None:
        """Nothing to create: the container is removed as it exits (`--rm`); one not yet seen gone
        is this run's place (local/place.py)."""
        self.run_id = plan.run_id

    def probe(self, plan: Plan, pair: Pair, waiter: Waiter) -> ProbeResult:
        raise NotImplementedError("a workload run has no probe")

    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        from aca_gpu.local.commands import container_command
        from aca_gpu.local.runner import stream_container

        workload, target = self.spec.workload, self.target
        env = {**workload.env, **workload.secret_values}  # read by name: no value on the command line
        command = container_command(
            target.runtime,
            workload.image,
            workload.command,
            gpus=target.gpus,
            env=env,
            binary=target.binary,
            name=pair.tester,
            podman_gpu=target.podman_gpu,
            network=True,
            binds=[(m.source, m.path, m.read_only) for m in workload.mounts],
        )
        self.commands["container"] = command.display()
        run = stream_container(command, plan.tester_timeout_s, waiter.cancel, self.console.line)
        if run.cancelled:
            self.result = WorkloadResult("stopped", reason="stopped (Ctrl-C)", seconds=run.seconds)
            raise WaitTimedOut("the container was stopped", code="Cancelled")
        if run.timed_out:
            self.result = WorkloadResult(
                "timeout", reason=f"still running after --max-minutes {plan.max_minutes}: stopped",
                seconds=run.seconds,
            )  # fmt: skip
        else:
            self.result = self._ended(run)
        return outcome_of(self.result)

    def _ended(self, run: ContainerRun) -> WorkloadResult:
        """Refused by the runtime (its reason, or the pull's), or exited (with a known crash's reason).

        A 126/127 after the container printed to stdout is its program's own code (a shell line's
        missing command), not a refusal: the container ran."""
        printed = len(self.console.lines["stdout"])
        why = (
            explain.refusal(self.spec.workload.image, [*run.stderr.splitlines(), run.refused])
            if run.refused is not None and not printed
            else explain.exec_refusal(printed, self.console.lines["stderr"])
        )
        if why is not None:
            return WorkloadResult(
                "refused", run.exit_code, why.reason, why.hint, seconds=run.seconds, error=why.error
            )
        crash = explain.crash(run.exit_code, run.stderr)
        return WorkloadResult(
            "exited", run.exit_code, crash.reason if crash else None, crash.hint if crash else None,
            seconds=run.seconds,
        )  # fmt: skip
