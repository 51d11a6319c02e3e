"""The place of a run on this machine: the containers it started and has not yet seen gone.

A local run makes nothing that outlives it: each container is `run --rm` and goes when it exits.
But a Ctrl-C ends the engine's wait while the thread running a container is still killing and
removing it, and the process must not exit before that is done, or the container outlives the run.
So until a container is seen gone it is the run's place, and teardown removes it and sees it gone.
"""

from __future__ import annotations

from aca_gpu.output import Progress
from aca_gpu.workflow.engine.outcome import NOTHING_CREATED, NoPlace, TeardownResult
from aca_gpu.workflow.engine.plan import Plan


class LocalPlace(NoPlace):
    """NoPlace, except for containers of this run still live in this process (their names carry
    the run id)."""

    run_id: str = ""  # set by the runtime's create_place

    def has_place(self) -> bool:
        from aca_gpu.local import runner  # loaded with the runtime's first container, not before

        return bool(self.run_id) and bool(runner.live(self.run_id))

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        from aca_gpu.local import runner

        removed = runner.remove_live(plan.run_id)
        if not removed:
            return NOTHING_CREATED
        return TeardownResult(
            "deleted", verified=True, billing_stopped=True, message=f"removed {', '.join(removed)}"
        )
