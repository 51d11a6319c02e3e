"""The engine's places loop: failover over the places a run allows, and `--wait-for-capacity`'s sweeps.

The first sweep tries each place with the run itself (`Engine._attempt`); a place that cannot take
it is left billing-first before the next. Without a wait that is all. With one, a place refused for
a reason waiting can cure is parked (parking.py: its group and serverless environment kept empty, a
Manual probe job beside them) and, after each gap (waiting.py), every parked place is asked for room
with one start of its probe job: the only ARM write a sweep makes there. A place with room is tried
with the run itself at once, in the group it kept; a place never parked (the runtime cannot, or
parking failed) gets a full attempt as in the first sweep. Every parked place not used is torn down
when the run ends, however it ends (`release_parked`, billing first, before the run's own teardown).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aca_gpu.errors import AcaGpuError, Interrupted
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import failover, parking, waiting
from aca_gpu.workflow.engine.failover import Attempt
from aca_gpu.workflow.engine.outcome import RunOutcome, TeardownResult
from aca_gpu.workflow.engine.plan import Plan

Place = tuple[str, str | None]  # (region, GPU alias; None: the plan's first GPU)


class Sweeps:
    """The places loop of `Engine` (core.py), which provides the attributes below."""

    base: Plan
    plan: Plan
    runtime: Any
    progress: Progress
    waiter: Waiter
    outcome: RunOutcome
    wait: waiting.CapacityWait | None
    parked: dict[Place, parking.Parked]
    more_regions: bool
    _removed: TeardownResult | None
    _attempt: Callable[[int, str, str | None], Attempt]
    _close_attempt: Callable[[], None]
    phase: Any
    interrupts: Any

    def _sweeps(self, places: tuple[Place, ...]) -> None:
        """Try the places in order; with `--wait-for-capacity`, sweep them again after a gap while
        every one refused for a reason waiting can cure, until the bound (waiting.py)."""
        outcome, wait = self.outcome, self.wait
        pending, number = list(places), 0
        while True:
            for index, place in enumerate(pending):
                region, gpu = place
                kept = self.parked.pop(place, None)  # a parked place with room: its own group again
                number += kept is None
                last = index == len(pending) - 1
                self.more_regions = not last or wait is not None
                attempt = self._attempt(kept.plan.names.attempt if kept else number, region, gpu)
                if self.interrupts.count and not outcome.interrupted:
                    # a Ctrl-C whose KeyboardInterrupt was swallowed (raised inside a finalizer,
                    # where Python only prints it): the cancel it set still ended the pairs
                    outcome.interrupted = True
                    outcome.error = Interrupted(f"interrupted: run {self.plan.run_id} stopped")
                following = self._place_label(*pending[index + 1]) if not last else "them again after a wait"
                error, where = self._refusal(), (region, self._gpu_of(gpu), self._profile_type(gpu))
                if error is not None and not outcome.interrupted:
                    waiting.learn(wait, *where, error)  # this wait's and the next runs' to know
                if not self.more_regions or not self._leave_region(attempt, following, place):
                    ran = any(p.probe is not None or p.tester is not None for p in outcome.pairs)
                    if ran and not outcome.interrupted:
                        waiting.placed(wait, *where, error)
                    return
            if wait is None:
                return
            try:
                pending = self._next_sweep(wait, places)
            except KeyboardInterrupt:  # Ctrl-C between two sweeps: what the wait kept is torn down
                self.waiter.cancel.set()
                pending = []
            if self.waiter.cancel.is_set():
                self._interrupted_waiting()
                return
            if not pending:
                return

    def _next_sweep(self, wait: waiting.CapacityWait, places: tuple[Place, ...]) -> list[Place]:
        """Gaps and asks until some place is worth the run itself; none at the bound or on Ctrl-C."""
        while True:
            pending = [p for p in places if wait.worth_trying(self._seen_key(p))]
            if not pending or not wait.pause(self._gpu_of(None), self.progress, self.waiter.cancel):
                if not self.waiter.cancel.is_set():
                    self.outcome.error = wait.error(self._gpu_of(None))
                    self.progress.warn(f"every place's last reason:\n{wait.table()}")
                return []
            pending = self._asked(wait, pending)
            if pending or self.waiter.cancel.is_set():
                return pending

    def _asked(self, wait: waiting.CapacityWait, pending: list[Place]) -> list[Place]:
        """A sweep after the first: every parked place asked for room (one start each). The places
        to try with the run now: those with room (or whose probe could not ask), then those never
        parked; none when every parked place said no."""
        asks = [self.parked[p] for p in pending if p in self.parked]
        if not asks:
            return pending
        self.progress.note(
            f"sweep {wait.sweeps}: asking {', '.join(a.region for a in asks)} for room "
            "(one start of a probe job each; nothing else of the run exists)"
        )
        began = time.time()
        answers: list[parking.Answer] = self.runtime.ask_parked(asks, self.waiter)
        room: list[Place] = []
        said: list[str] = []
        for answer in answers:
            kept = answer.parked
            assert kept is not None
            place = next(p for p, k in self.parked.items() if k is kept)
            if answer.refusal is not None:
                waiting.learn(wait, kept.region, self._gpu_of(place[1]), kept.profile_type, answer.refusal)
            elif answer.placed or answer.broken is not None:
                room.append(place)
                said.append(f"{kept.region} (room)" if answer.placed else f"{kept.region} (its probe "
                            f"failed: {answer.broken.message if answer.broken else ''})")  # fmt: skip
        wait.asked(began, [a.as_dict(self._gpu_of(a.parked.gpu if a.parked else None)) for a in answers])
        if room:
            self.progress.note(f"sweep {wait.sweeps}: trying the run in {', '.join(said)}")
        return room + [p for p in pending if p not in self.parked]

    def _interrupted_waiting(self) -> None:
        self.outcome.interrupted = True
        self.outcome.error = Interrupted(
            f"interrupted while waiting for capacity: run {self.plan.run_id} stopped "
            "(what it kept while waiting is torn down)"
        )

    def _leave_region(self, attempt: Attempt, following: str, place: Place) -> bool:
        """True when this region cannot place the plan and its attempt is cleaned up (or parked, when
        the run waits for capacity and waiting can cure the refusal): try `following`."""
        outcome = self.outcome
        errors = [outcome.error] if outcome.error is not None else [p.error for p in outcome.pairs if p.error]
        if outcome.interrupted or not errors or any(p.gpu_failure for p in outcome.pairs):
            return False
        blast, reason = failover.classify(errors[0])
        if blast != failover.NEXT_REGION:
            return False
        attempt.reason, attempt.blast = f"{reason}: {errors[0].message}", blast
        attempt.status = "abandoned" if self.runtime.has_place() else "refused"
        if self.runtime.has_place() and not self._park(attempt, place, errors[0]):
            with self.phase(f"teardown {attempt.region}") as step:
                result = self.runtime.remove_place(self.plan, self.progress)
                step.update(result.status)
            attempt.teardown = result.status
            if not result.clean:  # never start paying in another region while this one may bill
                outcome.teardown = result
                return False
            self._removed = result
        self._close_attempt()
        self.progress.warn(f"{attempt.region}: {reason}; trying {following}")
        outcome.error, outcome.pairs, outcome.resumed[:] = None, [], []
        return True

    def _park(self, attempt: Attempt, place: Place, error: AcaGpuError) -> bool:
        """Keep this place empty for the next sweeps' one-write asks (parking.py), when it can be."""
        park = getattr(self.runtime, "park_place", None)
        if self.wait is None or park is None or waiting.reason_of(error) not in waiting.WAITABLE:
            return False
        if self.wait.left_s() <= 0:  # no sweep will follow: the place goes now
            return False
        with self.phase(f"park {attempt.region}") as step:
            spec = park(self.plan, self.progress)
            step.update(
                f"kept empty, {spec.name} asks for room" if spec else "could not be kept: removing it"
            )
        if spec is None:
            return False
        self.parked[place] = parking.Parked(place[0], place[1], self._profile_type(place[1]), self.plan, spec)
        attempt.teardown, self._removed = "parked", None
        return True

    def _release_parked(self) -> TeardownResult | None:
        """Every parked place but the run's current one goes (the run's own teardown takes that);
        the first teardown that is not clean, else the last one (None: nothing released)."""
        worst: TeardownResult | None = None
        current = (
            self.plan.names.resource_group if self.runtime.has_place() and self._removed is None else None
        )
        for place, kept in list(self.parked.items()):
            if kept.resource_group == current:
                continue
            with self.phase(f"teardown {kept.region}") as step:
                result: TeardownResult = self.runtime.release_parked(kept)
                step.update(result.status)
            del self.parked[place]
            for attempt in self.outcome.attempts:
                if attempt.resource_group == kept.resource_group and attempt.teardown == "parked":
                    attempt.teardown = result.status
            worst = result if worst is None or worst.clean else worst
        return worst

    def _capped(self) -> None:
        """--max-cost reached: the run ends on it (exit 8), saying what was done and what was not."""
        cap, outcome = self.base.spend_cap, self.outcome
        if cap is None or not cap.reached or outcome.interrupted:
            return
        outcome.error = cap.error(*outcome.cap_summary())

    def _profile_type(self, gpu: str | None) -> str:
        pair = next((p for _, p in self.base.fallbacks if p.gpu == gpu), self.base.pairs[0])
        return pair.profile.type

    def _gpu_of(self, gpu: str | None) -> str:
        return gpu or (self.base.pairs[0].gpu if self.base.pairs else "gpu")

    def _seen_key(self, place: Place) -> tuple[str, str]:
        return place[0], self._gpu_of(place[1])

    def _refusal(self) -> AcaGpuError | None:
        """The error the attempt just made ended on (the run's own, else its first pair's)."""
        outcome = self.outcome
        if outcome.error is not None:
            return outcome.error
        return next((p.error for p in outcome.pairs if p.error is not None), None)

    def _place_label(self, region: str, gpu: str | None) -> str:
        """How the next place is named: its region, and its GPU when that is a fallback's."""
        first = self.base.pairs[0].gpu if self.base.pairs else None
        return region if gpu in (None, first) else f"{region} with {gpu}"
