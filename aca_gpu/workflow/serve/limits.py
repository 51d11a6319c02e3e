"""`serve --wait-for-capacity` and `serve --max-cost`: the two bounds `run` has, for a served app.

- **Waiting.** A served app's replica asks for a GPU only once the app exists, and an app that waits
  for a node would bill the moment it got one while `serve` was not there to judge it. So with
  `--wait-for-capacity` the place is asked for room first with the engine's probe job
  (engine/parking.py: one `Jobs_Start` per sweep, its replica timeout ending an unplaced probe by
  itself), and the app is made once a probe was placed. If the app is then refused all the same
  (the room was taken meanwhile: WorkLoad Profile Full, a replica never placed), it is removed
  billing first (scaled to 0, then deleted; the group and environment stay, at $0) and the wait goes
  on, within the same bound.
- **The cap.** While `serve` runs (the first answer, `--measure`), a watch reads the app's replica
  time from its system events at every look (spend/served.py, the figure `status` and `cost` show)
  and, when what is spent plus what the running replicas bill by the next look reaches the cap,
  stops the app billing first (teardown scales it to 0 before deleting it): exit 8. Once `serve`
  returns the app is kept, and nothing of this process watches it: the cap then holds through the
  app's TTL, which `--max-cost` shortens to what the cap pays for at `--max-replicas` replicas
  (serve/plan.py), removed by `reap` or the guard when it expires.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud, JobSpec
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine import parking, waiting
from aca_gpu.workflow.engine.spend_cap import SpendCap
from aca_gpu.workflow.spend.served import served_time


def probe_for(plan: Any, where: Any) -> JobSpec:
    """The serve's probe job: in the run's own group, on the app's GPU profile and environment."""
    return parking.probe_spec(
        f"gpu-room-{plan.run_id}", where.resource_group, plan.location, where.environment_id,
        where.profile_name, plan.pairs[0].profile, where.tags, plan.start_timeout_s,
    )  # fmt: skip


def room(cloud: Cloud, plan: Any, spec: JobSpec, wait: waiting.CapacityWait, progress: Progress,
         waiter: Waiter) -> None:  # fmt: skip
    """Wait until the serve's place has room for a replica (exit 3 at the bound)."""
    pair = plan.pairs[0]
    with progress.step(f"room for a {pair.gpu.upper()} in {plan.location}") as step:
        step.update(f"asking with one start of {spec.name} per sweep before the app is made")
        parking.wait_for_room(cloud, spec, wait, pair.gpu, pair.profile.type, progress, waiter)
        step.update(f"placed a replica (after {len(wait.asks)} ask(s))")


def refused_for_room(error: AcaGpuError, wait: waiting.CapacityWait | None) -> bool:
    """The app was refused for a reason waiting cures, and the wait has time left."""
    return wait is not None and waiting.reason_of(error) in waiting.WAITABLE and wait.left_s() > 0


@dataclass
class CapWatch:
    """Stops `serve` (its waiter's cancel) once the app's spend reaches the cap (`SpendCap`)."""

    cloud: Cloud
    resource_group: str
    app: str
    cap: SpendCap
    cancel: threading.Event
    seconds: float = 0.0  # the app's replica-seconds at the last look
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> CapWatch:
        self.cap.seconds = lambda: self.seconds
        spawn(self._run, "acagpu-serve-cap")
        return self

    def _run(self) -> None:
        running = 0
        while not self.stop.is_set():
            try:
                spent = served_time(self.cloud, self.resource_group, self.app, time.time())
                self.seconds, running = spent.seconds, spent.running
            except AcaGpuError:
                pass  # the last figure stands until the events can be read again
            if self.cap.must_stop(running):
                self.cancel.set()
                return
            self.stop.wait(self.cap.tick_s)
