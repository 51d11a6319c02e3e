"""The run engine: preflight → place → every pair (probe ∥ tester) → teardown in `finally`.

`up`, `validate`, `test` and `local` are plans handed to this one engine with a runtime. A runtime
(ACA here, local containers elsewhere) offers a few coarse operations; the engine owns the order,
the concurrency, the phase timings, Ctrl-C and the decision to tear down. Ctrl-C is handled here
only: the first one stops the work and tears down, a first one during teardown does not abandon
it, and a second one leaves the run in place and prints the exact `down` command.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import Any, Protocol, TypeVar

from aca_gpu.errors import (
    AcaGpuError,
    BadInput,
    GpuCheckFailed,
    InfraError,
    Interrupted,
    NotFound,
    QuotaError,
)
from aca_gpu.output import Progress
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import ChildCancel, Waiter, down_hint
from aca_gpu.workflow.base.threads import spawn, wait_for
from aca_gpu.workflow.engine import capacity, failover, parking, waiting
from aca_gpu.workflow.engine.failover import Attempt
from aca_gpu.workflow.engine.outcome import (
    PairOutcome,
    ProbeResult,
    RunOutcome,
    TeardownResult,
    TesterOutcome,
)
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.sweeps import Place, Sweeps
from aca_gpu.workflow.preflight import unavailable

T = TypeVar("T")
RUN_REMOVED = "RunRemoved"  # the run's group was deleted while it ran (`Engine._removed_under_it`)
LEAVING_GRACE_S = 1.0  # how long a pair waits for its tester once its region is being left
Prediction = tuple[dict[str, Any] | None, str | None]  # (predicted verdict, image digest) of a pair


class Runtime(Protocol):
    """What the engine needs from a place to run GPU containers (ACA, Docker, Podman, Apptainer)."""

    name: str

    def preflight(self, plan: Plan, progress: Progress) -> None:
        """Refuse a plan that cannot work before anything exists (provider, offer, quota).

        Each region attempt starts here: the runtime forgets the previous attempt's place (that
        attempt was torn down) but keeps counting its GPU-seconds."""

    def create_place(self, plan: Plan, progress: Progress, resumed: list[str]) -> None:
        """Make (or find again) where the pairs run; append what was found already to `resumed`."""

    def probe(self, plan: Plan, pair: Pair, waiter: Waiter) -> ProbeResult:
        """Start the explorer image and read nvidia-smi in it (ContainerRefused if it never starts)."""

    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        """Run the gpu-tester and judge its result."""

    def has_place(self) -> bool:
        """True once something of this run may exist (a create was at least sent)."""

    def keep_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        """--keep: leave the place, with nothing billing that need not (the explorer stopped)."""

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        """Tear everything down, billing first (never raises for cloud failures)."""

    def gpu_seconds(self) -> float:
        """GPU-seconds billed so far, from measured replica lifetimes."""


@dataclass
class Interrupts:
    """SIGINT in the main thread: counts presses and tells every wait to stop."""

    progress: Progress
    down_hint: str
    cancel: threading.Event = field(default_factory=threading.Event)
    count: int = 0
    in_teardown: bool = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.cancel.set()
        if self.in_teardown and self.count == 1:
            self.progress.warn(f"tearing down; Ctrl-C again to leave the run in place ({self.down_hint})")
            return
        raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # tests and embedders call the engine from other threads: no signal handling there
            return
        previous = signal.signal(signal.SIGINT, self.handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


# the steps a runtime's create_place times (cold: group, environment; warm: the borrowed one, group)
PLACE_STEPS = ("warm environment", "resource group", "environment")


class Engine(Sweeps):
    """One run of a plan on a runtime; `run()` returns a RunOutcome and never raises AcaGpuError."""

    def __init__(
        self,
        plan: Plan,
        runtime: Runtime,
        progress: Progress,
        waiter: Waiter,
        predictions: Mapping[int, Prediction] | None = None,
        outcome: RunOutcome | None = None,
    ) -> None:
        """`outcome` lets a runtime bring its own RunOutcome subclass (the document's runtime facts)."""
        self.plan, self.runtime, self.progress, self.waiter = plan, runtime, progress, waiter
        self.base = plan  # every region attempt is this plan in another region (failover.py)
        self.wait = (
            waiting.CapacityWait(plan.wait_for_capacity_s)
            if plan.wait_for_capacity_s is not None and not plan.existing
            else None
        )
        self._removed: TeardownResult | None = None  # the last left region's teardown, when clean
        self.parked: dict[Place, parking.Parked] = {}  # places kept empty while the run waits
        if plan.spend_cap is not None:  # --max-cost reads the run's measured replica lifetimes
            plan.spend_cap.seconds = runtime.gpu_seconds
        self.more_regions = False
        self._attempt_began = (time.monotonic(), 0.0)
        self.predictions = dict(predictions or {})
        self.outcome = outcome or RunOutcome(plan=plan, runtime=runtime.name)
        # the `down` every hint says (with --subscription when the run is not in the shell's own)
        self._down = down_hint(plan.run_id, getattr(runtime, "cloud", None), yes=False)
        self.outcome.down = self._down
        self.interrupts = Interrupts(progress, self._down, cancel=waiter.cancel)
        self._started = time.monotonic()

    # -- phases -------------------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[Any]:
        started = time.monotonic()
        try:
            with self.progress.step(name) as handle:
                yield handle
        finally:
            self.outcome.phases[name] = round(time.monotonic() - started, 3)

    def _mark(self, key: str) -> None:
        self.outcome.timings[key] = round(time.monotonic() - self._started, 3)

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        outcome = self.outcome
        # every (region, GPU) to try: `--regions`, the A100 order, then `--gpu a100,t4`'s fallbacks;
        # places known without capacity (preflight/unavailable.py) go last
        places = ((self.base.location, None),) if self.base.existing else self.base.places
        if not self.base.existing and self.base.env is None and len(places) > 1:
            places = tuple(unavailable.order(places, lambda p: (p[0], self._profile_type(p[1]))))
        with self.interrupts.installed():
            try:
                self._sweeps(places)
                self._capped()
                self._mark("time_to_verdict_s")
                self._finish()
            except KeyboardInterrupt:
                self._left("interrupted during teardown")
            finally:
                self._close_attempt()
        capacity.with_hints(self.base, [outcome.error, *(p.error for p in outcome.pairs)])
        if self.wait is not None:
            outcome.capacity_wait = self.wait.as_dict()
        if self.base.spend_cap is not None:
            outcome.cost_cap = self.base.spend_cap.as_dict()
        outcome.gpu_seconds = self.runtime.gpu_seconds()
        lives_of = getattr(self.runtime, "gpu_lives", None)  # the clouds' runtimes say how each was known
        outcome.gpu_lives = list(lives_of()) if callable(lives_of) else []
        self._mark("time_to_prompt_s")
        return outcome

    def _attempt(self, number: int, region: str, gpu: str | None = None) -> Attempt:
        """One region: the whole lifecycle but teardown, with the run's errors caught into the outcome."""
        outcome = self.outcome
        self.plan = outcome.plan = self.base.for_attempt(region, number, gpu)
        attempt = Attempt(region, self.plan.names.resource_group, gpu=self.plan.gpu_label or None)
        outcome.attempts.append(attempt)
        self._removed = None
        self._attempt_began = (time.monotonic(), self.runtime.gpu_seconds())
        try:
            self._work()
        except KeyboardInterrupt:
            outcome.interrupted = True
            self.waiter.cancel.set()
            outcome.error = Interrupted(f"interrupted: run {self.plan.run_id} stopped")
        except AcaGpuError as exc:
            outcome.error = exc
        except Exception as exc:  # a programming or SDK error must still tear down
            outcome.error = AcaGpuError(f"unexpected failure: {type(exc).__name__}: {exc}")
        return attempt

    def _close_attempt(self) -> None:
        """Time and cost of the attempt in progress (called once per attempt)."""
        attempt = self.outcome.attempts[-1] if self.outcome.attempts else None
        if attempt is None or attempt.cost is not None:
            return
        began, gpu_before = self._attempt_began
        attempt.seconds = time.monotonic() - began
        attempt.gpu_seconds = self.runtime.gpu_seconds() - gpu_before
        try:
            attempt.cost = checks.cost_estimate(
                self.plan.pairs[0].profile,
                attempt.gpu_seconds,
                attempt.region,
                label="measured replica lifetimes",
            )
        except BadInput:  # a profile without a price (this machine's own GPUs): nothing is billed
            attempt.cost = {
                "gpu_seconds": round(attempt.gpu_seconds, 1),
                "usd_estimate": None,
                "basis": "no price",
            }
        failure = self.outcome.failure()
        if attempt.status == "used" and failure is not None:
            attempt.status, attempt.reason = "failed", failure.message
            attempt.blast = failover.classify(failure)[0]
        if attempt.teardown is None:
            attempt.teardown = self.outcome.teardown.status

    def _work(self) -> None:
        plan = self.plan
        if not plan.existing:
            with self.phase("preflight"):
                self.runtime.preflight(plan, self.progress)
            try:
                self.runtime.create_place(plan, self.progress, self.outcome.resumed)
            finally:  # the place's own steps (the group, the environment) are phases of the run
                steps = getattr(self.progress, "phases", {})
                for name in PLACE_STEPS:
                    if name in steps:
                        self.outcome.phases[name] = steps[name]
        label = "test run" if not plan.probe else "probe and test"
        if len(plan.pairs) > 1:
            label = f"{len(plan.pairs)} pairs"
        if plan.command == "run":
            label = "container"
        with self.phase(label) as step:
            futures = [spawn(partial(self._pair, pair), f"acagpu-pair-{pair.index}") for pair in plan.pairs]
            self.outcome.pairs = [wait_for(f) for f in futures]
            passed = sum(1 for p in self.outcome.pairs if p.status == "pass")
            if plan.command != "run":  # the user's container: its own output says how it went
                # without a probe only the tester ran: name its image, not the one never started
                named = (
                    (lambda p: p.pair.label())
                    if plan.probe
                    else (lambda p: f"{plan.tester_image} on {p.pair.gpu}")
                )
                step.update(", ".join(f"{named(p)}: {p.status}" for p in self.outcome.pairs)[:200])
            if passed < len(self.outcome.pairs):
                step.status = "fail"

    def _pair(self, pair: Pair) -> PairOutcome:
        """Probe and tester side by side; a GPU verdict from the probe stops the tester early."""
        plan = self.plan
        result = PairOutcome(pair, strict=plan.strict)
        if pair.index in self.predictions:
            result.predicted, result.image_digest = self.predictions[pair.index]
        started = time.monotonic()
        # the run's cancel (Ctrl-C) is this pair's too: read at once by every check, and relayed to
        # wake its waits
        waiter = Waiter(interval=self.waiter.interval, cancel=ChildCancel(self.waiter.cancel))
        stop_children = threading.Event()

        def relay() -> None:
            while not stop_children.is_set():
                if self.waiter.cancel.wait(0.2):
                    waiter.cancel.set()
                    return

        spawn(relay, f"acagpu-relay-{pair.index}")
        probe = spawn(lambda: self.runtime.probe(plan, pair, waiter), "acagpu-probe") if plan.probe else None
        tester = (
            spawn(lambda: self.runtime.run_tester(plan, pair, waiter), "acagpu-tester")
            if plan.run_tester
            else None
        )
        try:
            if probe is not None:
                try:
                    result.probe = probe.result()
                    self._judge_probe(result)
                except AcaGpuError as exc:
                    result.error = exc
                if result.gpu_failure:
                    waiter.cancel.set()  # the verdict is known: do not pay for the tester
                elif isinstance(result.error, QuotaError):
                    waiter.cancel.set()  # no room for the probe here: the tester waits for nothing
                elif self._leaving(result.error):
                    waiter.cancel.set()  # this region is being left: stop waiting for the tester
            if tester is not None:
                try:
                    # a region being left does not wait out the tester's own deadline: its teardown
                    # deletes the job, which ends whatever call the tester is still in
                    grace = LEAVING_GRACE_S if self._leaving(result.error) else None
                    result.tester = tester.result(timeout=grace)
                except FutureTimeout:
                    pass
                except AcaGpuError as exc:
                    if result.error is None and not result.gpu_failure:
                        result.error = exc
            if result.tester is not None and result.probe is not None and result.probe.driver_version:
                result.tester_compat = checks.compat_verdict(plan.tester_image, result.probe.driver_version)
        finally:
            stop_children.set()
            result.seconds = time.monotonic() - started
        if (
            result.tester is not None
            and result.tester.status in ("unavailable", "timeout")
            and not result.error
        ):
            from aca_gpu.workflow.engine.tester_run import unavailable_error

            whose = "container" if plan.command == "run" else "tester"
            result.error = unavailable_error(result.tester, whose)
        if isinstance(result.error, GpuCheckFailed) and result.probe is None:
            result.probe = ProbeResult(refused=result.error.message)
            result.error = None
        return result

    def _leaving(self, error: AcaGpuError | None) -> bool:
        """The run will leave this region over `error` (another region is left to try)."""
        return error is not None and self.more_regions and failover.classify(error)[0] == failover.NEXT_REGION

    def _judge_probe(self, result: PairOutcome) -> None:
        probe = result.probe
        if probe is None or probe.failed or not probe.driver_version:
            return
        result.compat = checks.compat_verdict(result.pair.ref, probe.driver_version)

    # -- the end ------------------------------------------------------------------------------
    def _finish(self) -> None:
        plan, outcome = self.plan, self.outcome
        if plan.existing:
            outcome.teardown = TeardownResult("attached", billing_stopped=True)
            return
        released = None
        if self.parked:  # places a wait kept empty and did not use (sweeps.py)
            self.interrupts.in_teardown = True
            released = self._release_parked()
        if self._removed is not None:  # a wait for capacity ended after its last place was removed
            outcome.teardown = self._removed if released is None or released.clean else released
            return
        if not self.runtime.has_place():
            outcome.teardown = released or TeardownResult(
                "nothing-created", verified=True, billing_stopped=True
            )
            return
        if outcome.interrupted:
            self.progress.warn(f"interrupted: tearing down run {plan.run_id} (Ctrl-C again to leave it)")
        elif outcome.error is not None and not plan.keep:
            self.progress.warn(f"{outcome.error.message}: tearing down run {plan.run_id}")
        self.interrupts.in_teardown = True
        if plan.keep and not outcome.interrupted:
            with self.phase("keep"):
                outcome.teardown = self.runtime.keep_place(plan, self.progress)
            again = " again, as its `up --keep` asked" if plan.kept_before else ""
            self.progress.note(f"kept{again}: `{self._down}` removes it")
            return
        with self.phase("teardown") as step:
            outcome.teardown = self.runtime.remove_place(plan, self.progress)
            step.update(outcome.teardown.status + (" (verified gone)" if outcome.teardown.verified else ""))
            if not outcome.teardown.clean:
                step.status = "fail"
        if released is not None and not released.clean and outcome.teardown.clean:
            outcome.teardown = released
        for attempt in outcome.attempts:  # the place a wait kept last went with the run
            if attempt.teardown == "parked" and attempt.resource_group == plan.names.resource_group:
                attempt.teardown = outcome.teardown.status
        if outcome.teardown.status == "absent":  # its group was gone before its teardown came
            self._removed_under_it()
        if outcome.teardown.verified:
            self._mark("time_to_gone_s")
        if outcome.teardown.status == "deleting":
            self.progress.note(
                f"billing stopped; resource group {plan.names.resource_group} is still deleting "
                "(`acagpu status` shows it until it is gone)"
            )

    def _removed_under_it(self) -> None:
        """The run's group was gone when its teardown came: it was removed while it ran (`acagpu
        down` from another shell, reap, the guard). A 404 that removal caused is no bad input (exit
        2 says nothing was created): it is said as what it was, exit 7."""
        plan, outcome = self.plan, self.outcome
        removed = InfraError(
            f"run {plan.run_id} was removed while it ran: its resource group "
            f"{plan.names.resource_group} was deleted (`acagpu down`, reap or the guard)",
            code=RUN_REMOVED,
        )
        if isinstance(outcome.error, NotFound):
            outcome.error = removed
        for pair in outcome.pairs:
            if isinstance(pair.error, NotFound):
                pair.error = removed

    def _left(self, why: str) -> None:
        self.outcome.interrupted = True
        self.outcome.teardown = TeardownResult("left", message=f"{why}: left in place")
        self.outcome.error = Interrupted(
            f"{why}: run {self.plan.run_id} left in place",
            hint=self._down,
        )
        self.progress.warn(f"{why}: run {self.plan.run_id} left in place; remove it with: {self._down}")


def run_plan(
    plan: Plan,
    runtime: Runtime,
    progress: Progress,
    waiter: Waiter,
    predictions: Mapping[int, Prediction] | None = None,
) -> RunOutcome:
    return Engine(plan, runtime, progress, waiter, predictions).run()
