"""Typed results of a run, the one pass/fail rule, the one exit-code rule, the one JSON document.

Every runtime (ACA, local containers) fills the same records; `up`, `validate`, `test` and `local`
render the same document from them. A verdict on the GPU (exit 5) needs evidence from the GPU, the
driver or the image; anything lost on the way (a dropped session, a cut stream) is an
infrastructure outcome (exit 7) that says what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aca_gpu.errors import (
    EXIT_GPU_CHECK,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TEARDOWN,
    AcaGpuError,
    GpuCheckFailed,
    TeardownIncomplete,
)
from aca_gpu.gpu.cuda_compat import CompatVerdict
from aca_gpu.gpu.nvidia_smi_health import HealthReport
from aca_gpu.gpu.profiles import same_gpu
from aca_gpu.gpu.tester_result import TesterResult, summary_lines
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.engine import lifetime
from aca_gpu.workflow.engine.failover import Attempt
from aca_gpu.workflow.engine.lifetime import Lifetime
from aca_gpu.workflow.engine.plan import Pair, Plan, resource_names
from aca_gpu.workflow.engine.teardown import TeardownResult as TeardownResult  # where it lives (re-exported)

if TYPE_CHECKING:
    from aca_gpu.output import Progress

SCHEMA = 1

# Run statuses, derived from the exit code so the two can never disagree.
STATUS_BY_EXIT = {0: "ok", 5: "gpu_check_failed", 7: "infra_error", 130: "interrupted"}


def compat_passes(verdict: CompatVerdict | None) -> bool:
    """`CompatVerdict.ok` is the one CUDA rule; no verdict (no driver read) fails nothing."""
    return verdict is None or verdict.ok


@dataclass(frozen=True)
class ProbeResult:
    """nvidia-smi in the explorer: what it said, or the runtime's reason for not starting the image."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    error: str | None = None  # nvidia-smi's own failure state (NVML mismatch, no devices ...)
    exit_code: int | None = None
    refused: str | None = None  # the container runtime refused to start the image
    raw: str = ""
    raw_query: str = ""
    start_s: float | None = None  # from the create (or wake) request to a running replica
    smi_s: float | None = None  # the nvidia-smi exec itself
    health: HealthReport | None = None  # from `nvidia-smi -q` (and `topo -m` for several GPUs)
    raw_health: str = ""
    platform: dict[str, Any] = field(default_factory=dict, compare=False)  # phases.phases_of

    @property
    def failed(self) -> bool:
        return bool(self.error or self.refused)

    def as_dict(self) -> dict[str, Any]:
        return {
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": [dict(g) for g in self.gpus],
            "error": self.error,
            "refused": self.refused,
            "exit_code": self.exit_code,
            "raw": self.raw,
            "raw_query": self.raw_query,
            "health": self.health.as_dict() if self.health is not None else None,
        }


@dataclass(frozen=True)
class TesterOutcome:
    """One gpu-tester execution: `pass`/`fail` are verdicts; `unavailable` is a lost result (exit 7),
    `timeout` an execution the platform ended at its deadline (exit 4)."""

    status: str  # pass | fail | unavailable | timeout
    execution: str | None = None
    result: TesterResult | None = None
    exit_code: int | None = None
    reason: str | None = None
    seconds: float = 0.0  # measured replica lifetime, for the cost
    started_after_s: float | None = None  # from the start request to the first log line
    platform: dict[str, Any] = field(default_factory=dict, compare=False)  # phases.phases_of
    exit_code_note: str | None = None  # why `exit_code` is absent, when it is

    def as_dict(self) -> dict[str, Any]:
        result = self.result.as_dict() if self.result is not None else None
        if result is not None and self.reason and not result.get("reason"):
            result["reason"] = self.reason
        return {
            "execution": self.execution,
            "status": self.status,
            "exit_code": self.exit_code,
            "exit_code_note": self.exit_code_note if self.exit_code is None else None,
            "reason": self.reason,
            "result": result,
            # one readable line per GPU: rate, % of peak and of what its clock allows, telemetry
            "gpu_lines": summary_lines(self.result) if self.result is not None else [],
        }


@dataclass
class PairOutcome:
    """Everything learnt about one (image, GPU) pair; `status` and `reason` follow one rule."""

    pair: Pair
    predicted: dict[str, Any] | None = None
    probe: ProbeResult | None = None
    compat: CompatVerdict | None = None
    tester: TesterOutcome | None = None
    tester_compat: CompatVerdict | None = None
    error: AcaGpuError | None = None  # what stopped this pair other than a verdict
    image_digest: str | None = None
    seconds: float = 0.0
    strict: bool = False  # --strict: a degraded GPU fails the pair too

    @property
    def health(self) -> HealthReport | None:
        """The GPUs' health: the probe's `nvidia-smi -q` verdict; where the probe could not read one
        (no probe, no `-q` output, a lost session), the tester's own NVML readings (tester 1.2),
        judged by the same rules. A tester result without readings leaves the probe's unread report."""
        probed = self.probe.health if self.probe is not None else None
        if probed is not None and probed.verdict is not None:
            return probed
        result = self.tester.result if self.tester is not None else None
        tested = result.health if result is not None else None
        return tested if tested is not None and tested.verdict is not None else probed

    @property
    def health_source(self) -> str | None:
        """Where `health`'s verdict comes from: "nvidia-smi" (the probe), "tester" (its NVML), None."""
        health = self.health
        if health is None or health.verdict is None:
            return None
        return "nvidia-smi" if self.probe is not None and health is self.probe.health else "tester"

    def _health_label(self) -> str:
        return "GPU health (the tester's NVML readings)" if self.health_source == "tester" else "GPU health"

    @property
    def measured_gpu(self) -> str | None:
        """The GPU nvidia-smi (else the tester) named: the one every figure of this pair describes."""
        probe = self.probe
        if probe is not None and probe.gpus and probe.gpus[0].get("name"):
            return str(probe.gpus[0]["name"])
        result = self.tester.result if self.tester is not None else None
        return result.gpu_name if result is not None and result.gpu_name else None

    @property
    def gpu_mismatch(self) -> str | None:
        """A GPU measured that is not the profile's (the emulator's host workload on whatever GPU its
        machine has): the rates and health are that GPU's, the profile's name and price are not."""
        measured, wanted = self.measured_gpu, self.pair.profile.gpu
        if not measured or not wanted or same_gpu(measured, wanted):  # a local run names no GPU
            return None
        return (
            f"{self.pair.label()}: the GPU measured is {measured}, not {wanted} of profile "
            f"{self.pair.profile.type}: rates and health are the measured GPU's, the profile's price is not"
        )

    @property
    def warnings(self) -> list[str]:
        """What an operator would act on but does not fail the pair: a degraded GPU (not --strict), a
        GPU measured that is not the profile's."""
        found = [self.gpu_mismatch] if self.gpu_mismatch else []
        health = self.health
        if health is None or not health.degraded or self.strict:
            return found
        label = self._health_label()
        return found + [f"{self.pair.label()}: {label} {line}" for line in health.problems("degraded")]

    @property
    def phases(self) -> dict[str, float]:
        """Per-pair phase seconds: probe start (the probe job, or a kept run's explorer),
        nvidia-smi, tester start, test run."""
        found: dict[str, float | None] = {}
        if self.probe is not None:
            found["probe start"] = self.probe.start_s
            found["nvidia-smi"] = self.probe.smi_s
            found["probe image pull"] = (self.probe.platform.get("image_pull") or {}).get("seconds")
        if self.tester is not None:
            found["tester start"] = self.tester.started_after_s
            started = self.tester.started_after_s or 0.0
            found["test run"] = round(max(0.0, self.tester.seconds), 3) if started is not None else None
            found["tester image pull"] = (self.tester.platform.get("image_pull") or {}).get("seconds")
        return {k: round(v, 3) for k, v in found.items() if v is not None}

    @property
    def platform(self) -> dict[str, Any]:
        """The platform's own account of each container's start (system events; phases.py)."""
        found = {
            "probe": self.probe.platform if self.probe else {},
            "tester": self.tester.platform if self.tester else {},
        }
        return {k: v for k, v in found.items() if v}

    @property
    def gpu_failure(self) -> str | None:
        """The reason the GPU, driver or image failed, or None when nothing says so."""
        if self.probe is not None and self.probe.refused:
            return f"container refused to start: {self.probe.refused}"
        if self.probe is not None and self.probe.error:
            return f"nvidia-smi: {self.probe.error}"
        health = self.health
        if health is not None and (health.failed or (self.strict and health.degraded)):
            return f"{self._health_label()} {health.summary()}" + (" (--strict)" if not health.failed else "")
        if not compat_passes(self.compat):
            assert self.compat is not None
            return f"incompatible: {self.compat.reason}"
        if self.tester is not None and self.tester.status == "fail":
            return f"tester failed: {self.tester.reason or 'fail'}"
        if isinstance(self.error, GpuCheckFailed):
            return self.error.message
        return None

    @property
    def status(self) -> str:
        if self.gpu_failure:
            return "fail"
        if self.error is not None or (
            self.tester is not None and self.tester.status in ("unavailable", "timeout")
        ):
            return "error"
        return "pass"

    @property
    def reason(self) -> str:
        failure = self.gpu_failure
        if failure:
            return failure
        if self.error is not None:
            return self.error.message
        if self.tester is not None and self.tester.status == "unavailable":
            return f"tester result unavailable: {self.tester.reason}"
        driver = self.probe.driver_version if self.probe else None
        verdict = self.compat.verdict if self.compat else "not checked"
        parts = [f"driver {driver}, {verdict}" if driver else "tester passed"]
        if self.compat is not None and self.compat.verdict == "minor-compat":
            parts.append("runs under CUDA minor-version compatibility")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        probe = self.probe or ProbeResult()
        result = self.tester.result if self.tester else None
        bf16 = result.rates.get("bf16") if result else None
        return {
            "image": self.pair.image,
            "gpu": self.pair.gpu,
            "profile": self.pair.profile.type,
            "status": self.status,
            "reason": self.reason,
            "driver_version": probe.driver_version,
            "cuda_version": probe.cuda_version,
            "gpu_name": probe.gpus[0].get("name") if probe.gpus else (result.gpu_name if result else None),
            "bf16_tflops": bf16.tflops if bf16 else None,
            "image_digest": self.image_digest,
            "preflight": self.predicted,
            "compat": self.compat.as_dict() if self.compat else None,
            "refused": probe.refused,
            "tester": self.tester.as_dict()["result"] if self.tester else None,
            "tester_status": self.tester.status if self.tester else "not-run",
            "gpu_lines": self.tester.as_dict()["gpu_lines"] if self.tester else [],
            "health": self.health.as_dict() if self.health is not None else None,
            "health_verdict": self.health.verdict if self.health is not None else None,
            "health_source": self.health_source,
            "warnings": self.warnings,
            "error": self.error.as_dict() if self.error else None,
            "seconds": round(self.seconds, 1),
            "phases": self.phases,
            "phase_clocks": phase_clocks(self.phases),
            "platform": self.platform,
        }


WALL, PLATFORM = "wall", "platform"


def phase_clocks(phases: dict[str, float]) -> dict[str, str]:
    """Which clock each phase was read on: `wall`, timed by this client, or `platform`, the figure the
    platform states itself (the kubelet's `pulled ... in 73.7s`). On Azure both run at one speed; an
    emulator's platform runs on its scaled clock (`--time-scale`), so its figures are not wall time."""
    return {name: PLATFORM if name.endswith("image pull") else WALL for name in phases}


NOTHING_CREATED = TeardownResult("nothing-created", verified=True, billing_stopped=True)


class NoPlace:
    """The place half of the engine's Runtime for this machine: nothing to keep, remove or bill."""

    def has_place(self) -> bool:
        return False

    def keep_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        return NOTHING_CREATED

    def remove_place(self, plan: Plan, progress: Progress) -> TeardownResult:
        return NOTHING_CREATED

    def gpu_seconds(self) -> float:
        return 0.0  # this machine's own GPUs: nothing is billed


# a teardown that leaves the run in place: the document says the `down` that removes it (`delete`)
LEFT = ("kept", "left", "incomplete", "failed")


@dataclass
class RunOutcome:
    """A whole run, as the engine saw it; the exit code and the JSON document come from here only."""

    plan: Plan
    runtime: str = "aca"
    pairs: list[PairOutcome] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float | None] = field(default_factory=dict)
    teardown: TeardownResult = field(default_factory=lambda: TeardownResult("not-started"))
    resumed: list[str] = field(default_factory=list)
    error: AcaGpuError | None = None  # what stopped the run itself (preflight, place, teardown)
    interrupted: bool = False
    gpu_seconds: float = 0.0
    # (execution, its figure and how it was known): `gpu_seconds_quality` (engine/lifetime.py)
    gpu_lives: list[tuple[str, Lifetime]] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)  # one per region tried (failover.py)
    capacity_wait: dict[str, Any] | None = None  # --wait-for-capacity: sweeps, every place's reason
    cost_cap: dict[str, Any] | None = None  # --max-cost: the cap, what was spent, the overshoot bound
    down: str = ""  # the `acagpu down` that removes the run (down_hint: with its --subscription)

    def cap_summary(self) -> tuple[str, str, str | None]:
        """(what was done, what was not, how to continue) when --max-cost stopped the run."""
        done = [p.pair.label() for p in self.pairs if p.status in ("pass", "fail")]
        return (
            ("judged: " + ", ".join(done)) if done else "nothing finished",
            "the work still running was stopped at the cap",
            None,
        )

    @property
    def exit_code(self) -> int:
        """Interrupted > the run's own error > something left behind > a GPU verdict > a pair's error."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.error is not None:
            return self.error.exit_code
        if not self.teardown.clean:
            return EXIT_TEARDOWN
        if any(p.status == "fail" for p in self.pairs):
            return EXIT_GPU_CHECK
        for pair in self.pairs:
            if pair.status == "error":
                return pair.error.exit_code if pair.error is not None else 7
        return EXIT_OK

    @property
    def status(self) -> str:
        return STATUS_BY_EXIT.get(self.exit_code, "failed")

    def failure(self) -> AcaGpuError | None:
        """The one error a non-zero exit is explained by (for the one-line message and `error`)."""
        if self.interrupted:
            return self.error
        if self.error is not None:
            return self.error
        if not self.teardown.clean:
            return TeardownIncomplete(
                self.teardown.message or f"run {self.plan.run_id} was not fully removed",
                hint=self._down(),
            )
        failed = [p for p in self.pairs if p.status == "fail"]
        if failed:
            first = failed[0]
            more = f" (and {len(failed) - 1} more pair(s))" if len(failed) > 1 else ""
            return GpuCheckFailed(f"{first.pair.label()}: {first.reason}{more}")
        for pair in self.pairs:
            if pair.status == "error":
                if pair.error is not None:
                    return pair.error
                from aca_gpu.errors import InfraError

                return InfraError(f"{pair.pair.label()}: {pair.reason}")
        return None

    def cost(self) -> dict[str, Any]:
        first = self.plan.pairs[0]
        found = checks.cost_estimate(
            first.profile, self.gpu_seconds, self.plan.location, label="measured replica lifetimes"
        )
        return {**found, **lifetime.summary(self.gpu_lives)}

    def document(self) -> dict[str, Any]:
        """The JSON envelope shared by up, validate, test and local."""
        plan = self.plan
        error = self.failure()
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "command": plan.command,
            "run_id": plan.run_id,
            "status": self.status,
            "runtime": self.runtime,
            "location": plan.location,
            "profile": checks.profile_dict(plan.pairs[0].profile, plan.pairs[0].gpu),
            "resources": resource_names(plan.names, plan.env, plan.keep),
            "resumed": list(self.resumed),
        }
        if plan.command in ("up", "test", "local"):
            doc.update(self._single_pair_sections())
        doc.update(
            {
                "tester_image": plan.tester_image,
                "results": [p.as_dict() for p in self.pairs],
                "phases": self._phases(),
                "phase_clocks": phase_clocks(self._phases()),
                "timings": dict(self.timings),
                "cost": self.cost(),
                "teardown": self.teardown.as_dict(),
                **({"delete": f"{self._down()} --yes"} if self.teardown.status in LEFT else {}),
                "attempts": [a.as_dict() for a in self.attempts],
                **({"capacity_wait": self.capacity_wait} if self.capacity_wait is not None else {}),
                **({"cost_cap": self.cost_cap} if self.cost_cap is not None else {}),
                "warnings": [w for p in self.pairs for w in p.warnings],
                "error": error.as_dict() if error is not None else None,
            }
        )
        return doc

    def _down(self) -> str:
        return self.down or f"acagpu down --run-id {self.plan.run_id}"

    def _phases(self) -> dict[str, float]:
        """The run's phases; a single pair's own phases (probe start, nvidia-smi ...) join them."""
        phases = dict(self.phases)
        if len(self.pairs) == 1:
            phases.update(self.pairs[0].phases)
        return phases

    def _single_pair_sections(self) -> dict[str, Any]:
        plan = self.plan
        pair = self.pairs[0] if self.pairs else PairOutcome(plan.pairs[0])
        probe = pair.probe or ProbeResult()
        # `test` runs the tester alone: no image of the explorer's ran, so none is named
        explorer = {"image": pair.pair.image if plan.probe else None, **probe.as_dict()}
        if not plan.probe:
            explorer["status"] = "not-run"
        explorer["compat"] = pair.compat.as_dict() if pair.compat else None
        tester: dict[str, Any] = {"image": plan.tester_image}
        if pair.tester is not None:
            tester.update(pair.tester.as_dict())
        else:
            tester.update({"execution": None, "status": "not-run", "result": None})
        tester["compat"] = pair.tester_compat.as_dict() if pair.tester_compat else None
        return {"explorer": explorer, "tester": tester}
