"""`acagpu local`: the explorer probe and the gpu-tester on this machine's container runtime.

The same questions `up` answers on Azure, asked of Docker, Podman or Apptainer here: is a GPU
visible in the container, does the host driver it reports support the image's CUDA, what does the
tester measure. nvidia-smi runs in the explorer image while the tester runs zero-build in the tester
image, side by side. A container the runtime refuses to start is a GPU verdict only when its text
says the GPU could not be passed in (no toolkit, no CDI spec, CUDA requirement, no device); a
runtime that cannot run at all (no Docker engine) is bad input, exit 2, before anything runs.

It runs through the run engine like `up`: `LocalRuntime` is the engine's second runtime (no place
to create or remove, so teardown is `nothing-created`), and the JSON document is `up`'s, with the
run's local facts where Azure ones would be (profile: this machine; resources: container names;
cost: nothing billed). `ProbeFacts`/`TesterFacts` judge one container run each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aca_gpu import naming
from aca_gpu.config import DEFAULT_IMAGE
from aca_gpu.errors import AcaGpuError, BadInput, GpuCheckFailed, InfraError, WaitTimedOut
from aca_gpu.gpu import nvidia_smi, runtime_errors, tester_result
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.gpu.nvidia_smi_health import HealthReport
from aca_gpu.gpu.profiles import GpuProfile
from aca_gpu.models import ExecResult
from aca_gpu.output import Progress
from aca_gpu.tester import DEFAULT_TESTER_IMAGE
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Engine
from aca_gpu.workflow.engine.outcome import NOTHING_CREATED as NOTHING_CREATED
from aca_gpu.workflow.engine.outcome import ProbeResult, RunOutcome, TesterOutcome
from aca_gpu.workflow.engine.plan import Pair, Plan
from aca_gpu.workflow.engine.probe import EXEC_TIMEOUT_S, health_of
from aca_gpu.workflow.local.place import LocalPlace

if TYPE_CHECKING:
    from aca_gpu.local.probe import LocalTarget

NO_GPU = "no GPU visible in the container"


@dataclass(frozen=True)
class LocalRequest:
    runtime: str = "auto"
    image: str = DEFAULT_IMAGE
    tester_image: str = DEFAULT_TESTER_IMAGE
    gpus: str = "all"
    podman_gpu: str = "cdi"
    sif: str | None = None
    run_tester: bool = True
    tester_args: tuple[str, ...] = ()
    probe_timeout_s: float = 900.0  # covers a first pull of a multi-GB CUDA image
    tester_minutes: int = 30


@dataclass(frozen=True)
class ProbeFacts:
    """nvidia-smi in the explorer container (the fields of the engine's ProbeResult)."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    exit_code: int | None = None
    refused: str | None = None
    raw: str = ""
    fix: str | None = None

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
            "fix": self.fix,
            "raw": self.raw,
        }


@dataclass(frozen=True)
class TesterFacts:
    """One gpu-tester container (the fields of the engine's TesterOutcome)."""

    status: str  # pass | fail | unavailable | timeout | not-run
    result: tester_result.TesterResult | None = None
    exit_code: int | None = None
    reason: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "execution": None,
            "status": self.status,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "result": self.result.as_dict() if self.result else None,
        }


def _no_gpu_reason(text: str, fallback: str) -> tuple[str, str | None]:
    """The one-line reason the GPU did not reach the container, and its fix."""
    found = runtime_errors.first(text)
    if found is None:
        return fallback, None
    if not found.gpu_absent or found.summary.startswith(NO_GPU):
        return found.summary, found.fix
    return f"{NO_GPU}: {found.summary}", found.fix


def probe_facts(run: Any) -> ProbeFacts:
    """Judge a `ContainerRun` of nvidia-smi: refused by the runtime, nvidia-smi's failure, or GPUs."""
    text = "\n".join(part for part in (run.stdout, run.stderr) if part)
    if run.timed_out:
        return ProbeFacts(
            error="timed out", raw=text, refused=f"nvidia-smi did not finish in {run.seconds:.0f} s"
        )
    if run.refused is not None:
        reason, fix = _no_gpu_reason(run.stderr, run.refused)
        return ProbeFacts(refused=reason, exit_code=run.exit_code, raw=text, fix=fix)
    parsed = nvidia_smi.parse(run.stdout or run.stderr)
    if parsed.ok:
        gpus = tuple(
            {"index": g.index, "name": g.name, "memory_total_mib": g.memory_total_mib} for g in parsed.gpus
        )
        return ProbeFacts(parsed.driver_version, parsed.cuda_version, gpus, exit_code=run.exit_code, raw=text)
    reason, fix = _no_gpu_reason(
        text, parsed.error_message or parsed.error or f"nvidia-smi exited {run.exit_code}"
    )
    return ProbeFacts(error=reason, exit_code=run.exit_code, raw=text, fix=fix)


def health_facts(run: Any) -> tuple[HealthReport, str]:
    """Judge a `ContainerRun` of `nvidia-smi -q` by the ACA probe's rules (`probe.health_of`).

    Health is evidence on top of the table's verdict: a container that did not start or finish
    leaves it unread (said so in the report), never a GPU failure by itself."""
    if run.timed_out:
        return HealthReport(None, error=f"nvidia-smi -q did not finish in {run.seconds:.0f} s"), ""
    if run.refused is not None:
        return HealthReport(None, error=f"nvidia-smi -q: the container did not start: {run.refused}"), ""
    report, raw = health_of(
        ExecResult(("nvidia-smi", "-q"), run.stdout or run.stderr, run.stderr, run.exit_code)
    )
    assert report is not None  # health_of judges every result it is given
    return report, raw


def tester_facts(run: Any) -> TesterFacts:
    """pass/fail from the tester's result line and exit code; refused containers say why."""
    if run.cancelled:
        return TesterFacts(
            "not-run", reason="stopped: the probe's verdict was already known", seconds=run.seconds
        )
    if run.refused is not None:
        reason, _ = _no_gpu_reason(run.stderr, run.refused)
        return TesterFacts(
            "fail",
            exit_code=run.exit_code,
            reason=f"the tester container did not start: {reason}",
            seconds=run.seconds,
        )
    if run.timed_out:
        return TesterFacts(
            "unavailable", reason=f"the tester did not finish in {run.seconds:.0f} s", seconds=run.seconds
        )
    try:
        result = tester_result.parse_tester_output(run.stdout)
    except tester_result.NoTesterResult as exc:
        tail = " | ".join(line.strip() for line in run.stderr.splitlines()[-3:] if line.strip())
        status = "fail" if run.exit_code not in (None, 0) else "unavailable"
        reason = f"exit {run.exit_code}: {tail}" if tail else exc.message
        return TesterFacts(status, exit_code=run.exit_code, reason=reason, seconds=run.seconds)
    if result.passed and run.exit_code not in (None, 0):
        return TesterFacts(
            "fail", result, run.exit_code, f"the tester exited with code {run.exit_code}", run.seconds
        )
    return TesterFacts(result.status, result, run.exit_code, result.reason, run.seconds)


class LocalRuntime(LocalPlace):
    """The engine's Runtime on this machine: each probe and tester is one `run --rm` container."""

    def __init__(self, target: LocalTarget, why: str, tester_args: tuple[str, ...] = ()) -> None:
        self.target, self.why, self.tester_args = target, why, tester_args
        self.name = target.runtime
        self.commands: dict[str, str] = {}
        self.fixes: dict[int, str] = {}

    def preflight(self, plan: Plan, progress: Progress) -> None:
        progress.note(self.why)

    def create_place(self, plan: Plan, progress: Progress, resumed: list[str]) -> None:
        """Nothing to create: containers are removed as they exit (`--rm`); one not yet seen gone
        is this run's place (local/place.py)."""
        self.run_id = plan.run_id

    def probe(self, plan: Plan, pair: Pair, waiter: Waiter) -> ProbeResult:
        """nvidia-smi in the explorer image, then, when it listed the GPUs, `nvidia-smi -q` for their
        health: a failed GPU fails the pair (exit 5) and a degraded one warns, as in `up`."""
        from aca_gpu.local.probe import health_command, probe_command
        from aca_gpu.local.runner import run_container

        command = probe_command(self.target, pair.image)
        self.commands["explorer"] = command.display()
        run = run_container(command, plan.start_timeout_s, waiter.cancel)
        if run.cancelled:
            raise WaitTimedOut("cancelled before nvidia-smi finished in the explorer", code="Cancelled")
        facts = probe_facts(run)
        if facts.fix:
            self.fixes[pair.index] = facts.fix
        health, raw_health, seconds = None, "", run.seconds
        if not facts.failed:
            query = health_command(self.target, pair.image)
            self.commands["explorer_health"] = query.display()
            checked = run_container(query, EXEC_TIMEOUT_S, waiter.cancel)
            if checked.cancelled:
                raise WaitTimedOut(
                    "cancelled before nvidia-smi -q finished in the explorer", code="Cancelled"
                )
            health, raw_health = health_facts(checked)
            seconds += checked.seconds
        return ProbeResult(
            facts.driver_version,
            facts.cuda_version,
            facts.gpus,
            facts.error,
            facts.exit_code,
            facts.refused,
            facts.raw,
            smi_s=round(seconds, 3),
            health=health,
            raw_health=raw_health,
        )

    def run_tester(self, plan: Plan, pair: Pair, waiter: Waiter) -> TesterOutcome:
        from aca_gpu.local.probe import tester_command
        from aca_gpu.local.runner import run_container

        command = tester_command(self.target, plan.tester_image, self.tester_args)
        self.commands["tester"] = command.display()
        run = run_container(command, plan.tester_timeout_s, waiter.cancel)
        if run.cancelled:
            raise WaitTimedOut(
                "the tester was stopped: the probe's verdict was already known", code="Cancelled"
            )
        facts = tester_facts(run)
        return TesterOutcome(facts.status, None, facts.result, facts.exit_code, facts.reason, facts.seconds)


@dataclass
class LocalRunOutcome(RunOutcome):
    """`up`'s outcome and document, with this machine's facts where Azure's would be."""

    why: str = ""
    gpus: str = "all"
    commands: dict[str, str] = field(default_factory=dict)
    fixes: dict[int, str] = field(default_factory=dict)

    def cost(self) -> dict[str, Any]:
        return {"gpu_seconds": 0.0, "usd_estimate": 0.0, "basis": "this machine's own GPUs: nothing billed"}

    @property
    def exit_code(self) -> int:
        pulled = None if self.interrupted else pull_failure(self.pairs)
        return pulled.exit_code if pulled is not None else super().exit_code

    def failure(self) -> AcaGpuError | None:
        """The engine's one error, with the fix for a GPU that never reached the container as its hint.

        An image the runtime could not pull never started: that is no verdict on the GPU (exit 5)
        but a pull error, exit 2 (the image as named cannot be had) or 7 (its registry unreachable)."""
        pulled = pull_failure(self.pairs)
        if pulled is not None:
            return pulled
        error = super().failure()
        failed = [p for p in self.pairs if p.status == "fail" and p.pair.index in self.fixes]
        if isinstance(error, GpuCheckFailed) and failed and error.hint is None:
            return GpuCheckFailed(error.message, code=error.code, hint=self.fixes[failed[0].pair.index])
        return error

    def document(self) -> dict[str, Any]:
        doc = super().document()
        probe = self.pairs[0].probe if self.pairs else None
        names = [str(g.get("name")) for g in (probe.gpus if probe else ()) if g.get("name")]
        doc["profile"] = {
            "alias": self.gpus,
            "type": "local",
            "gpu": names[0] if names else None,
            "gpu_count": len(names) if probe and probe.driver_version else None,
            "cpu": os.cpu_count(),
            "memory": None,
            "serverless": False,
        }
        pair = self.plan.pairs[0]
        doc["resources"] = {"explorer_container": pair.explorer, "tester_container": pair.tester}
        doc["runtime_reason"] = self.why
        doc["commands"] = dict(self.commands)
        return doc


def image_pull_error(image: str, text: str) -> AcaGpuError | None:
    """ImagePullFailed when the runtime's `text` says `image` could not be pulled, else None: exit 2
    (the image as named cannot be had), or 7 when its registry could not be reached."""
    found = runtime_errors.image_pull(text)
    if found is None:
        return None
    message = f"cannot pull image {image}: {text.strip().removeprefix('Error: ')}"[:400]
    if found.kind == runtime_errors.REGISTRY_UNREACHABLE:
        return InfraError(message, code="ImagePullFailed", hint=found.fix)
    return BadInput(message, code="ImagePullFailed", hint=found.fix)


def pull_failure(pairs: Any) -> AcaGpuError | None:
    """ImagePullFailed for the first pair whose explorer image could not be pulled, else None."""
    for pair in pairs:
        text = (pair.probe.refused or "") if pair.probe is not None else ""
        error = image_pull_error(pair.pair.image, text)
        if error is not None:
            return error
    return None


def _local_profile(count: int | None) -> GpuProfile:
    cpus = os.cpu_count() or 1
    return GpuProfile(
        type="local",
        aliases=("local",),
        gpu="",
        gpu_count=count or 0,
        vcpu=cpus,
        memory_gib=0,
        serverless=False,
        container_cpu=float(cpus),
        container_memory_gib=0,
        regions=("local",),
        note="this machine",
    )


def _image_ref(image: str) -> ImageRef:
    """The reference the CUDA verdict reads; an image file (SIF) has no tag, so its verdict is unknown."""
    try:
        return parse_image_ref(image)
    except BadInput:
        return parse_image_ref("localhost/image-file:latest")


def make_local_plan(request: LocalRequest, run_id: str) -> Plan:
    """One pair on this machine; names are the containers' (`acagpu-RUN-explorer`, `-tester`)."""
    for flag, value in (("--image", request.image), ("--tester-image", request.tester_image)):
        if not value.strip():
            raise BadInput(f"{flag} is empty: give a value or leave the flag out")
    image = (request.sif or request.image).strip()
    pair = Pair(
        1,
        image,
        _image_ref(image),
        f"local:{request.gpus}",
        _local_profile(None),
        "local",
        f"acagpu-{run_id}-explorer",
        f"acagpu-{run_id}-tester",
    )
    return Plan(
        command="local",
        run_id=run_id,
        names=naming.RunNames(run_id),
        location="local",
        pairs=(pair,),
        tester_image=request.tester_image.strip(),
        ttl=timedelta(0),
        max_minutes=request.tester_minutes,
        start_timeout_s=request.probe_timeout_s,
        owner="local",
        run_tester=request.run_tester,
    )


def run_local(request: LocalRequest, progress: Progress, waiter: Waiter | None = None) -> RunOutcome:
    """Choose the runtime (BadInput if none can run), then the engine: probe ∥ tester, one verdict."""
    from aca_gpu.local import detect
    from aca_gpu.local.gpus import parse_gpus
    from aca_gpu.local.probe import LocalTarget

    gpus = parse_gpus(request.gpus)
    if request.sif and request.runtime not in ("auto", "apptainer"):
        raise BadInput("--from-sif runs an Apptainer image file: use it with --runtime apptainer")
    run_id = naming.new_run_id()
    plan = make_local_plan(request, run_id)
    status, why = detect.choose("apptainer" if request.sif and request.runtime == "auto" else request.runtime)
    assert status.binary is not None
    target = LocalTarget(status.name, status.binary, gpus, request.podman_gpu, request.sif, run_id)
    runtime = LocalRuntime(target, why, request.tester_args)
    outcome = LocalRunOutcome(
        plan=plan,
        runtime=runtime.name,
        why=why,
        gpus=str(gpus),
        commands=runtime.commands,
        fixes=runtime.fixes,
    )
    return Engine(plan, runtime, progress, waiter or Waiter(interval=0.5), outcome=outcome).run()
