"""`acagpu validate`: does this CUDA image work on this ACA GPU profile? For CI, one or many pairs.

For each (image, GPU) pair: predict a verdict from the image's CUDA version and the last known
host driver, deploy the explorer with that image, read nvidia-smi, judge the real driver, run the
tester, and say pass or fail with the reason. All pairs share one resource group and one
environment (one workload profile per GPU type) and run concurrently. Teardown always runs; the
TTL tags are the backstop if even that is interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import EXIT_GPU_CHECK, AcaGpuError, BadInput, PreflightRefused, WaitTimedOut
from aca_gpu.gpu import cuda_compat
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.models import AppSpec, Cloud, EnvSpec, JobSpec, ReplicaInfo
from aca_gpu.output import Progress
from aca_gpu.workflow import checks, drivers
from aca_gpu.workflow.context import Waiter
from aca_gpu.workflow.down import teardown_group
from aca_gpu.workflow.probe import probe_smi
from aca_gpu.workflow.replicas import _safe_events, replica_details
from aca_gpu.workflow.tester_run import TesterRun, ensure_job, follow_result, start_execution
from aca_gpu.workflow.up import PROVIDER, REGISTER_TIMEOUT_S

DEFAULT_MAX_MINUTES = 20
DEFAULT_START_TIMEOUT = "10m"
MAX_PAIRS = 16
# Text that means a replica will never start, so waiting out the deadline would only cost money.
FATAL_START_MARKERS = (
    "requirement error",
    "ContainerCreateFailure",
    "ErrImagePull",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "BackoffLimitExceeded",
)

ImageInspector = Callable[[ImageRef], dict[str, Any]]


@dataclass(frozen=True)
class ValidateRequest:
    images: tuple[str, ...]
    gpus: tuple[str, ...]
    location: str | None = None
    run_id: str | None = None
    ttl: str | None = None
    max_minutes: int | None = None
    start_timeout: str | None = None
    tester_image: str | None = None
    driver: str | None = None  # override the last known driver used for the prediction
    run_tester: bool = True


@dataclass(frozen=True)
class Pair:
    index: int
    image: str
    gpu: str
    profile: checks.Profile
    profile_name: str  # workload profile name inside the shared environment
    explorer: str
    tester: str


@dataclass(frozen=True)
class ValidatePlan:
    run_id: str
    names: naming.RunNames
    location: str
    pairs: tuple[Pair, ...]
    tester_image: str
    max_minutes: int
    start_timeout_s: float
    tags: dict[str, str]
    driver: str | None
    run_tester: bool

    @property
    def gpu_profiles(self) -> list[tuple[str, str]]:
        seen: dict[str, str] = {}
        for pair in self.pairs:
            seen.setdefault(pair.profile_name, pair.profile.type)
        return list(seen.items())


def _profile_name(alias: str) -> str:
    return "gpu-" + "".join(ch for ch in alias if ch.isalnum())[:11]


def make_plan(settings: Settings, request: ValidateRequest, *, owner: str) -> ValidatePlan:
    """Every flag checked before any cloud call: bad input creates nothing (exit 2)."""
    if not request.images or not request.gpus:
        raise BadInput("give at least one --image and one --gpu")
    images = tuple(dict.fromkeys(i.strip() for i in request.images))
    for image in images:
        parse_image_ref(image)
    gpus = tuple(dict.fromkeys(g.strip().lower() for g in request.gpus))
    profiles = {gpu: checks.resolve_profile(gpu) for gpu in gpus}
    if len(images) * len(gpus) > MAX_PAIRS:
        raise BadInput(f"{len(images) * len(gpus)} pairs requested; at most {MAX_PAIRS} per validation")
    run_id = naming.validate_run_id(request.run_id) if request.run_id else naming.new_run_id()
    names = naming.RunNames(run_id).validate()
    location = naming.validate_location(request.location or settings.location)
    ttl: timedelta = naming.parse_ttl(request.ttl or settings.ttl)
    max_minutes = request.max_minutes or DEFAULT_MAX_MINUTES
    if not 1 <= max_minutes <= 1440:
        raise BadInput(f"invalid --max-minutes {max_minutes}: use 1 to 1440")
    start_timeout = naming.parse_ttl(request.start_timeout or DEFAULT_START_TIMEOUT).total_seconds()
    tester_image = (request.tester_image or checks.default_tester_image()).strip()
    parse_image_ref(tester_image)
    if request.driver:
        cuda_compat.parse_driver_version(request.driver)
    pairs = []
    for index, (image, gpu) in enumerate(((i, g) for i in images for g in gpus), start=1):
        explorer = naming.validate_aca_name(f"{names.explorer}-{index}", "app")
        tester = naming.validate_aca_name(f"{names.tester}-{index}", "job")
        pairs.append(Pair(index, image, gpu, profiles[gpu], _profile_name(gpu), explorer, tester))
    tags = naming.run_tags(run_id, owner=owner, ttl=ttl, gpu=gpus[0])
    return ValidatePlan(
        run_id=run_id,
        names=names,
        location=location,
        pairs=tuple(pairs),
        tester_image=tester_image,
        max_minutes=max_minutes,
        start_timeout_s=start_timeout,
        tags=tags,
        driver=request.driver,
        run_tester=request.run_tester,
    )


def predict(pair: Pair, location: str, driver: str | None, info: dict[str, Any] | None) -> dict[str, Any]:
    """The verdict before deploying: the image's CUDA (tag, else registry config) vs the last driver."""
    source = "--driver"
    if driver is None:
        driver, source = drivers.known_driver(pair.profile.type, location)
    ref = parse_image_ref(pair.image)
    require = (info or {}).get("require_cuda")
    subject: ImageRef | str | None = ref
    if ref.cuda_version is None and (info or {}).get("cuda_version"):
        subject = str(info["cuda_version"])  # type: ignore[index]
    doc: dict[str, Any] = cuda_compat.verdict(subject, driver, require=require).as_dict()
    doc["driver_source"] = source
    return doc


@dataclass
class PairOutcome:
    pair: Pair
    preflight: dict[str, Any]
    status: str = "fail"
    reason: str = ""
    smi: dict[str, Any] = field(default_factory=dict)
    compat: dict[str, Any] | None = None
    tester: dict[str, Any] | None = None
    image_digest: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        result = self.tester or {}
        dtypes = result.get("rates") or {}
        bf16 = dtypes.get("bf16") if isinstance(dtypes, dict) else None
        bf16_tflops = bf16.get("tflops") if isinstance(bf16, dict) else result.get("bf16_tflops")
        gpus = self.smi.get("gpus") or []
        return {
            "image": self.pair.image,
            "gpu": self.pair.gpu,
            "profile": self.pair.profile.type,
            "status": self.status,
            "reason": self.reason,
            "driver_version": self.smi.get("driver_version"),
            "cuda_version": self.smi.get("cuda_version"),
            "gpu_name": gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None,
            "bf16_tflops": bf16_tflops,
            "image_digest": self.image_digest,
            "preflight": self.preflight,
            "compat": self.compat,
            "tester": self.tester,
            "seconds": round(self.seconds, 1),
        }


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _fatal(texts: Sequence[str]) -> str | None:
    """The most telling fatal text: the runtime's own error beats a generic back-off state."""
    for marker in FATAL_START_MARKERS:
        for text in texts:
            for line in text.splitlines():
                if marker.lower() in line.lower():
                    return line.strip()
    return None


class ValidateFlow:
    def __init__(
        self,
        cloud: Cloud,
        plan: ValidatePlan,
        progress: Progress,
        waiter: Waiter,
        inspector: ImageInspector | None = None,
    ) -> None:
        self.cloud, self.plan, self.progress, self.waiter = cloud, plan, progress, waiter
        self.inspector = inspector
        self.env_id: str | None = None
        self.rg_ours = False
        self.phases: dict[str, float] = {}
        self.teardown: dict[str, Any] = {"status": "not-started", "verified": False}

    def run(self) -> tuple[dict[str, Any], int]:
        outcomes: list[PairOutcome] = []
        error: AcaGpuError | None = None
        interrupted = False
        started = time.monotonic()
        try:
            outcomes = self._preflight()
            self._provision()
            outcomes = self._run_pairs(outcomes)
        except KeyboardInterrupt:
            interrupted = True
            self.waiter.cancel.set()
        except AcaGpuError as exc:
            error = exc
        finally:
            self._teardown()
        self.phases["total"] = round(time.monotonic() - started, 3)
        doc = self.document(outcomes, error, interrupted)
        if error is not None:
            return doc, error.exit_code
        if interrupted:
            return doc, 130
        if self.teardown.get("status") not in ("deleted", "nothing-created"):
            return doc, 6
        return doc, EXIT_GPU_CHECK if any(o.status != "pass" for o in outcomes) else 0

    def _preflight(self) -> list[PairOutcome]:
        plan = self.plan
        with self.progress.step("preflight") as step:
            infos: dict[str, dict[str, Any]] = {}
            for image in dict.fromkeys(p.image for p in plan.pairs):
                infos[image] = self._inspect(image)
            outcomes = []
            for pair in plan.pairs:
                outcome = PairOutcome(pair, predict(pair, plan.location, plan.driver, infos[pair.image]))
                outcome.image_digest = infos[pair.image].get("digest")
                outcomes.append(outcome)
            risky = sum(1 for o in outcomes if o.preflight.get("verdict") == "incompatible")
            step.update(f"{len(outcomes)} pair(s), {risky} predicted incompatible")
            if not self.cloud.provider_registered(PROVIDER):
                self.cloud.register_provider(PROVIDER, timeout=REGISTER_TIMEOUT_S)
            offered = {o.name.lower() for o in self.cloud.available_profiles(plan.location)}
            missing = sorted({t for _, t in plan.gpu_profiles if t.lower() not in offered})
            if missing:
                raise PreflightRefused(f"{plan.location} does not offer {', '.join(missing)}")
        return outcomes

    def _inspect(self, image: str) -> dict[str, Any]:
        if self.inspector is None:
            return {}
        try:
            return self.inspector(parse_image_ref(image))
        except AcaGpuError as exc:
            self.progress.warn(f"could not read {image} from its registry: {exc.message}")
            return {}

    def _provision(self) -> None:
        plan, cloud = self.plan, self.cloud
        rg = plan.names.resource_group
        with self.progress.step("resource group") as step:
            group = cloud.get_resource_group(rg)
            if group is not None and dict(group.tags).get(naming.TAG_RUN_ID) != plan.run_id:
                raise PreflightRefused(f"resource group {rg} exists and is not run {plan.run_id}'s")
            if group is None:
                cloud.create_resource_group(rg, plan.location, plan.tags)
            self.rg_ours = True
            step.update(rg)
        with self.progress.step("environment") as step:
            (first_name, first_type), *rest = plan.gpu_profiles
            env = cloud.get_environment(rg, plan.names.environment)
            if env is None or env.provisioning_state != "Succeeded":
                env = cloud.create_environment(
                    EnvSpec(
                        resource_group=rg,
                        name=plan.names.environment,
                        location=plan.location,
                        tags=plan.tags,
                        gpu_profile_name=first_name,
                        gpu_profile_type=first_type,
                        extra_gpu_profiles=tuple(rest),
                    )
                )
            self.env_id = env.id
            step.update(" + ".join(t for _, t in plan.gpu_profiles))

    def _run_pairs(self, outcomes: list[PairOutcome]) -> list[PairOutcome]:
        with self.progress.step(f"validate {len(outcomes)} pair(s)") as step:
            with ThreadPoolExecutor(
                max_workers=min(8, len(outcomes)), thread_name_prefix="acagpu-val"
            ) as pool:
                done = list(pool.map(self._run_pair, outcomes))
            passed = sum(1 for o in done if o.status == "pass")
            step.update(f"{passed} passed, {len(done) - passed} failed")
        for outcome in done:
            self.progress.note(
                f"{outcome.status}: {outcome.pair.image} on {outcome.pair.gpu} {outcome.reason}"
            )
        return done

    def _run_pair(self, outcome: PairOutcome) -> PairOutcome:
        started = time.monotonic()
        try:
            self._check_pair(outcome)
        except _Refused as exc:
            outcome.status, outcome.reason = "fail", f"container refused to start: {exc.message}"
        except WaitTimedOut as exc:
            outcome.status, outcome.reason = "fail", exc.message
        except AcaGpuError as exc:
            outcome.status, outcome.reason = "fail", f"{type(exc).__name__}: {exc.message}"
        outcome.seconds = time.monotonic() - started
        return outcome

    def _check_pair(self, outcome: PairOutcome) -> None:
        plan, cloud, pair = self.plan, self.cloud, outcome.pair
        rg = plan.names.resource_group
        assert self.env_id is not None
        if cloud.get_app(rg, pair.explorer) is None:
            cloud.create_app(
                AppSpec(
                    resource_group=rg,
                    name=pair.explorer,
                    location=plan.location,
                    environment_id=self.env_id,
                    workload_profile_name=pair.profile_name,
                    container=checks.explorer_container(pair.image, pair.profile, plan.max_minutes),
                    tags=plan.tags,
                )
            )
        self._wait_started(pair.explorer)
        outcome.smi = probe_smi(cloud, rg, pair.explorer, self.waiter)
        driver = outcome.smi.get("driver_version")
        if outcome.smi.get("error") or not driver:
            outcome.reason = f"nvidia-smi: {outcome.smi.get('error') or 'no driver version'}"
            return
        drivers.remember_driver(pair.profile.type, plan.location, str(driver))
        outcome.compat = checks.compat(pair.image, str(driver))
        if checks.compat_failed(outcome.compat):
            outcome.reason = f"incompatible: {(outcome.compat or {}).get('reason', '')}"
            return
        if plan.run_tester:
            outcome.tester = self._run_tester(pair)
            if checks.tester_failed(outcome.tester):
                outcome.reason = (
                    f"tester failed: {outcome.tester.get('reason') or outcome.tester.get('status')}"
                )
                return
        outcome.status = "pass"
        verdict = (outcome.compat or {}).get("verdict", "ok")
        outcome.reason = f"driver {driver}, {verdict}"

    def _wait_started(self, app: str) -> None:
        rg = self.plan.names.resource_group
        last: list[ReplicaInfo] = []

        def probe() -> ReplicaInfo | None:
            last[:] = self.cloud.list_app_replicas(rg, app)
            for replica in last:
                if replica.running_state == "Running" and all(
                    c.running_state in (None, "Running") for c in replica.containers
                ):
                    return replica
            details = replica_details(last)
            if _fatal(details) is None:
                return None
            # the events carry the runtime's message when the replica only shows a back-off state
            fatal = _fatal(details + _safe_events(self.cloud, rg, app=app))
            if fatal:
                raise _Refused(fatal)
            return None

        def describe() -> str:
            return "; ".join(replica_details(last) + _safe_events(self.cloud, rg, app=app))

        self.waiter.until(
            f"a running replica of {app}", probe, timeout=self.plan.start_timeout_s, describe=describe
        )

    def _run_tester(self, pair: Pair) -> dict[str, Any]:
        plan, rg = self.plan, self.plan.names.resource_group
        assert self.env_id is not None
        spec = JobSpec(
            resource_group=rg,
            name=pair.tester,
            location=plan.location,
            environment_id=self.env_id,
            workload_profile_name=pair.profile_name,
            container=checks.tester_container(plan.tester_image, pair.profile),
            tags=plan.tags,
            replica_timeout_s=plan.max_minutes * 60,
        )
        reused = ensure_job(self.cloud, spec)
        run: TesterRun = start_execution(self.cloud, rg, pair.tester, resume=reused)
        return follow_result(self.cloud, rg, pair.tester, run, self.waiter, timeout=plan.max_minutes * 60)

    def _teardown(self) -> None:
        if not self.rg_ours:
            self.teardown = {"status": "nothing-created", "verified": True}
            return
        waiter = Waiter(interval=self.waiter.interval)  # a cancelled run must still be able to wait
        try:
            with self.progress.step("teardown") as step:
                self.teardown = teardown_group(self.cloud, self.plan.names.resource_group, waiter)
                step.update(
                    "verified gone" if self.teardown.get("verified") else str(self.teardown["status"])
                )
        except KeyboardInterrupt:
            self.teardown = {"status": "left", "verified": False}
            self.progress.warn(
                f"teardown interrupted; `acagpu down --run-id {self.plan.run_id}` removes it "
                "(the reaper will, once its TTL passes)"
            )
        except AcaGpuError as exc:
            self.teardown = {"status": "failed", "verified": False, "message": exc.message}

    def document(
        self, outcomes: list[PairOutcome], error: AcaGpuError | None, interrupted: bool
    ) -> dict[str, Any]:
        failed = sum(1 for o in outcomes if o.status != "pass")
        status = "interrupted" if interrupted else "failed" if error else "fail" if failed else "pass"
        return {
            "schema": 1,
            "kind": "validate",
            "run_id": self.plan.run_id,
            "location": self.plan.location,
            "status": status,
            "tester_image": self.plan.tester_image,
            "results": [o.as_dict() for o in outcomes],
            "phases": dict(self.phases),
            "teardown": dict(self.teardown),
            "error": error.as_dict() if error else None,
        }


def validate(
    cloud: Cloud,
    plan: ValidatePlan,
    progress: Progress,
    waiter: Waiter,
    inspector: ImageInspector | None = None,
) -> tuple[dict[str, Any], int]:
    return ValidateFlow(cloud, plan, progress, waiter, inspector).run()


def registry_inspector(ref: ImageRef) -> dict[str, Any]:
    """Digest and CUDA env of an image from its registry (Docker Hub, nvcr.io, ACR, any OCI registry)."""
    from aca_gpu.registry.images import inspect_image
    from aca_gpu.workflow.tags import TagsQuery, default_source

    query = TagsQuery(repository=ref.repository)
    info = inspect_image(default_source(ref, query), ref.repository, ref.digest or ref.tag or "latest")
    return {"digest": info.digest, "cuda_version": info.cuda_version, "require_cuda": info.require_cuda}
