"""`acagpu local`: the explorer probe and the gpu-tester on this machine's container runtime.

The same questions `up` answers on Azure, asked of Docker, Podman or Apptainer here: is a GPU
visible in the container, does the host driver it reports support the image's CUDA, what does the
tester measure. nvidia-smi runs in the explorer image while the tester runs zero-build in the tester
image, side by side. A container the runtime refuses to start is a GPU verdict only when its text
says the GPU could not be passed in (no toolkit, no CDI spec, CUDA requirement, no device); a
runtime that cannot run at all (no Docker engine) is bad input, exit 2, before anything runs.

The facts of each run (`ProbeFacts`, `TesterFacts`) carry the fields of the run engine's typed
records, so the same runs can be handed to the engine as a runtime.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aca_gpu.config import DEFAULT_IMAGE
from aca_gpu.errors import EXIT_FAILURE, EXIT_GPU_CHECK, EXIT_OK, BadInput
from aca_gpu.gpu import nvidia_smi, runtime_errors, tester_result
from aca_gpu.output import Progress
from aca_gpu.tester import DEFAULT_TESTER_IMAGE
from aca_gpu.workflow import checks

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
    probe_timeout_s: float = 600.0
    tester_timeout_s: float = 1800.0


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

    status: str  # pass | fail | unavailable
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


@dataclass
class LocalOutcome:
    """One local run: the runtime chosen and why, what the probe and the tester found, one verdict."""

    request: LocalRequest
    runtime: str
    why: str
    run_id: str
    probe: ProbeFacts | None = None
    compat: dict[str, Any] | None = None
    tester: TesterFacts | None = None
    tester_compat: dict[str, Any] | None = None
    phases: dict[str, float] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_failure(self) -> str | None:
        if self.probe is not None and self.probe.refused:
            return self.probe.refused
        if self.probe is not None and self.probe.error:
            return f"nvidia-smi: {self.probe.error}"
        if _compat_failed(self.compat):
            assert self.compat is not None
            return f"incompatible: {self.compat.get('reason')}"
        if self.tester is not None and self.tester.status == "fail":
            return f"tester failed: {self.tester.reason or 'fail'}"
        return None

    @property
    def exit_code(self) -> int:
        if self.gpu_failure:
            return EXIT_GPU_CHECK
        if self.tester is not None and self.tester.status == "unavailable":
            return EXIT_FAILURE
        return EXIT_OK

    @property
    def status(self) -> str:
        return {EXIT_OK: "ok", EXIT_GPU_CHECK: "gpu_check_failed"}.get(self.exit_code, "failed")

    @property
    def reason(self) -> str:
        failure = self.gpu_failure
        if failure:
            return failure
        if self.tester is not None and self.tester.status == "unavailable":
            return f"tester result unavailable: {self.tester.reason}"
        driver = self.probe.driver_version if self.probe else None
        verdict = (self.compat or {}).get("verdict", "not checked")
        return f"driver {driver}, {verdict}" if driver else "tester passed"

    def document(self) -> dict[str, Any]:
        """The keys of `up`'s document that a local run has (no cloud resources, no cost)."""
        req = self.request
        probe = self.probe or ProbeFacts()
        result = self.tester.result if self.tester else None
        explorer = {"image": req.sif or req.image, **probe.as_dict(), "compat": self.compat}
        tester: dict[str, Any] = {"image": req.tester_image}
        tester.update(
            self.tester.as_dict() if self.tester else {"execution": None, "status": "not-run", "result": None}
        )
        tester["compat"] = self.tester_compat
        pair = {
            "image": req.sif or req.image,
            "gpu": req.gpus,
            "status": "fail" if self.gpu_failure else ("error" if self.exit_code else "pass"),
            "reason": self.reason,
            "driver_version": probe.driver_version,
            "cuda_version": probe.cuda_version,
            "gpu_name": probe.gpus[0].get("name") if probe.gpus else (result.gpu_name if result else None),
            "compat": self.compat,
            "refused": probe.refused,
            "tester_status": self.tester.status if self.tester else "not-run",
        }
        return {
            "run_id": self.run_id,
            "status": self.status,
            "runtime": self.runtime,
            "runtime_reason": self.why,
            "location": "local",
            "explorer": explorer,
            "tester": tester,
            "tester_image": req.tester_image,
            "results": [pair],
            "phases": dict(self.phases),
            "commands": dict(self.commands),
            "teardown": {"status": "nothing-created", "verified": True, "billing_stopped": True},
        }


def run_local(request: LocalRequest, progress: Progress) -> LocalOutcome:
    """Choose the runtime (BadInput if none can run), then the probe ∥ the tester, then judge."""
    from aca_gpu.local import detect
    from aca_gpu.local.gpus import parse_gpus
    from aca_gpu.local.probe import LocalTarget, probe_command, tester_command
    from aca_gpu.local.runner import ContainerRun, run_container

    gpus = parse_gpus(request.gpus)
    if request.sif and request.runtime not in ("auto", "apptainer"):
        raise BadInput("--from-sif runs an Apptainer image file: use it with --runtime apptainer")
    status, why = detect.choose("apptainer" if request.sif and request.runtime == "auto" else request.runtime)
    assert status.binary is not None
    run_id = uuid.uuid4().hex[:6]
    target = LocalTarget(status.name, status.binary, gpus, request.podman_gpu, request.sif, run_id)
    outcome = LocalOutcome(request, status.name, why, run_id)
    probe_cmd = probe_command(target, request.image)
    tester_cmd = (
        tester_command(target, request.tester_image, request.tester_args) if request.run_tester else None
    )
    outcome.commands["explorer"] = probe_cmd.display()
    if tester_cmd is not None:
        outcome.commands["tester"] = tester_cmd.display()
    progress.note(why)
    runs: dict[str, ContainerRun] = {}
    stop_tester = threading.Event()

    def tester_thread() -> None:
        assert tester_cmd is not None
        runs["tester"] = run_container(tester_cmd, request.tester_timeout_s, stop_tester)

    started = time.monotonic()
    worker = threading.Thread(target=tester_thread, name="acagpu-local-tester", daemon=True)
    if tester_cmd is not None:
        worker.start()
    with progress.step("probe") as step:
        runs["explorer"] = run_container(probe_cmd, request.probe_timeout_s)
        outcome.probe = probe_facts(runs["explorer"])
        if outcome.probe.driver_version:
            outcome.compat = _compat(request.image, outcome.probe.driver_version)
        step.update(outcome.probe.refused or outcome.probe.error or f"driver {outcome.probe.driver_version}")
        if outcome.probe.failed or _compat_failed(outcome.compat):
            step.status = "fail"
            stop_tester.set()  # the verdict is known: the tester cannot change it
    outcome.phases["probe"] = round(runs["explorer"].seconds, 3)
    if tester_cmd is not None:
        with progress.step("test run") as step:
            worker.join()
            outcome.tester = tester_facts(runs["tester"])
            if outcome.probe.driver_version:
                outcome.tester_compat = _compat(request.tester_image, outcome.probe.driver_version)
            step.update(
                f"{outcome.tester.status}" + (f": {outcome.tester.reason}" if outcome.tester.reason else "")
            )
            if outcome.tester.status != "pass":
                step.status = "fail"
        outcome.phases["test run"] = round(runs["tester"].seconds, 3)
    outcome.phases["total"] = round(time.monotonic() - started, 3)
    return outcome


def _compat(image: str, driver: str) -> dict[str, Any] | None:
    verdict = checks.compat_verdict(image, driver)
    return None if verdict is None else dict(verdict.as_dict())


def _compat_failed(doc: dict[str, Any] | None) -> bool:
    """The engine's rule (CompatVerdict.ok), read from the verdict's document."""
    return doc is not None and (doc.get("verdict") == "incompatible" or doc.get("require_check") == "fail")
