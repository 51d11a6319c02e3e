"""A run's plan: every flag validated, every name derived and every image parsed, before any cloud call.

One `Plan` serves every flow the engine runs: `up` is one (image, GPU) pair, `validate` many pairs in
one shared environment, `test` one tester-only pair on a run that already exists. Bad input must
create nothing (exit 2), so this module touches no cloud at all; `--dry-run` prints the plan and stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.gpu import cuda_compat
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.engine import failover, waiting
from aca_gpu.workflow.engine.spend_cap import SpendCap

DEFAULT_MAX_MINUTES = 30
DEFAULT_START_TIMEOUT = "15m"
VALIDATE_MAX_MINUTES = 20
VALIDATE_START_TIMEOUT = "10m"
GPU_PROFILE_NAME = "gpu"
MAX_PAIRS = 16


@dataclass(frozen=True)
class Pair:
    """One (explorer image, GPU profile) combination and the ACA names it runs under."""

    index: int
    image: str  # as the user wrote it (trimmed): what is deployed and reported
    ref: ImageRef  # parsed once, here
    gpu: str  # the alias the user gave (t4, a100, nc24-a100 ...)
    profile: checks.Profile
    profile_name: str  # the workload profile's name inside the environment
    explorer: str  # container app name
    tester: str  # job name

    def label(self) -> str:
        return f"{self.image} on {self.gpu}"

    @property
    def probe(self) -> str:
        """The probe job's name (a kept run's explorer app is `explorer`)."""
        return self.explorer.replace("cuda-explorer-", "cuda-probe-", 1)


@dataclass(frozen=True)
class Plan:
    """Shared settings plus the pairs; the engine needs nothing else to run, resume or tear down."""

    command: str  # up | validate | test | local: names the JSON document
    run_id: str
    names: naming.RunNames
    location: str
    pairs: tuple[Pair, ...]
    tester_image: str
    ttl: timedelta
    max_minutes: int
    start_timeout_s: float
    owner: str
    tags: dict[str, str] = field(default_factory=dict)
    keep: bool = False  # skip teardown (the explorer is stopped, the TTL still applies)
    # `up --run-id ID` of a run an `up --keep` left: kept again, never torn down by the resume
    kept_before: bool = False
    probe: bool = True  # run nvidia-smi in an explorer per pair
    run_tester: bool = True
    existing: bool = False  # the place already exists (acagpu test): create nothing, remove nothing
    wait_gone: bool = False  # teardown waits for the group's 404, not only for billing to stop
    driver: str | None = None  # validate: predict against this driver instead of the last one seen
    regions: tuple[str, ...] = ()  # failover order (first = location); empty: `location` only
    # `--gpu a100,t4`: after the first GPU's regions, these (region, GPU pair) places, in order
    fallbacks: tuple[tuple[str, Pair], ...] = ()
    strict: bool = False  # a degraded GPU (health) fails the pair too, not only a failed one
    env: str | None = None  # a warm environment (`acagpu env`) the run borrows instead of building one
    # --wait-for-capacity: seconds to sweep the places while none can place the run (waiting.py)
    wait_for_capacity_s: float | None = None
    # --max-cost: the run's cap, shared by its task runners and its region attempts (spend_cap.py)
    spend_cap: SpendCap | None = field(default=None, compare=False, repr=False)

    def with_max_cost(self, usd: float | None, usd_per_s: float) -> Plan:
        """The plan capped at `usd` (None: uncapped; bad input when not even one start fits)."""
        if usd is None:
            return self
        cap = SpendCap.checked(usd, usd_per_s)  # its tag: `cost` and `status` read the cap from the run
        return replace(self, spend_cap=cap, tags={**self.tags, naming.TAG_MAX_COST: f"{cap.cap_usd:g}"})

    @property
    def region_order(self) -> tuple[str, ...]:
        return self.regions or (self.location,)

    @property
    def places(self) -> tuple[tuple[str, str], ...]:
        """Every (region, GPU alias) the engine may try, in order: the first GPU across its
        regions, then each fallback GPU across its own."""
        first = tuple((region, self.pairs[0].gpu) for region in self.region_order)
        return first + tuple((region, pair.gpu) for region, pair in self.fallbacks)

    def for_attempt(self, region: str, attempt: int, gpu: str | None = None) -> Plan:
        """The plan of one attempt: its own resource group after the first (failover.py), and the
        fallback GPU's pair when `gpu` names one. Its group is tagged with the GPU(s) it uses, not
        the whole `--gpu a100,t4` list: status, reap and `test` price and probe what ran."""
        plan = replace(self, location=region, names=replace(self.names, attempt=attempt))
        fallback = next((pair for _, pair in self.fallbacks if pair.gpu == gpu), None)
        if fallback is not None and gpu != self.pairs[0].gpu:
            plan = replace(plan, pairs=(fallback,))
        return replace(plan, tags=naming.with_gpu(plan.tags, plan.gpu_label))

    @property
    def tester_timeout_s(self) -> int:
        return self.max_minutes * 60

    @property
    def gpu_profiles(self) -> list[tuple[str, str]]:
        """(workload profile name, type) of every GPU the pairs use, first one first."""
        seen: dict[str, str] = {}
        for pair in self.pairs:
            seen.setdefault(pair.profile_name, pair.profile.type)
        return list(seen.items())

    @property
    def dedicated(self) -> bool:
        """A dedicated profile's node bills while the environment exists, replicas or not."""
        return any(not pair.profile.serverless for pair in self.pairs)

    @property
    def gpu_label(self) -> str:
        return ",".join(dict.fromkeys(pair.gpu for pair in self.pairs))

    def estimate(self) -> dict[str, Any]:
        """Upper bound: the explorer and the tester each billed for the whole --max-minutes."""
        replicas = int(self.probe) + int(self.run_tester)
        seconds = float(replicas * self.max_minutes * 60)
        total: dict[str, Any] = {"gpu_seconds": 0.0, "usd_estimate": 0.0, "basis": ""}
        for pair in self.pairs:
            est = checks.cost_estimate(
                pair.profile,
                seconds,
                self.location,
                label=f"upper bound: {replicas} replica(s) x {self.max_minutes} min (--max-minutes)",
            )
            total["gpu_seconds"] = round(total["gpu_seconds"] + est["gpu_seconds"], 1)
            total["usd_estimate"] = round(total["usd_estimate"] + est["usd_estimate"], 4)
            total["basis"] = est["basis"]
        return total

    def warnings(self) -> list[str]:
        """What the plan should say before anything bills: a kept run stays kept, and a kept
        dedicated node keeps billing."""
        found = []
        if self.kept_before:
            found.append(
                f"run {self.run_id} was kept (`up --keep`): resumed, it stays kept; "
                f"`acagpu down --run-id {self.run_id} --yes` removes it"
            )
        if not (self.keep and self.dedicated):
            return found
        from aca_gpu import cost

        for pair in self.pairs:
            if pair.profile.serverless:
                continue
            hourly = cost.price_per_hour(pair.profile, location=self.location)
            ttl = cost.run_spend(pair.profile, self.ttl.total_seconds(), self.location)
            found.append(
                f"{pair.profile.type} is a dedicated profile: its node bills while the environment exists, "
                f"with or without a replica (≈${hourly:.2f}/h, estimate); kept, it bills until "
                f"`acagpu down` or the reaper at the TTL "
                f"({self.ttl.total_seconds() / 60:g} min: ≈${ttl.usd:.2f})"
            )
        return found

    def as_dict(self) -> dict[str, Any]:
        """The `--dry-run` document (and the plan part of every run document)."""
        first = self.pairs[0]
        doc: dict[str, Any] = {
            "run_id": self.run_id,
            "location": self.location,
            "profile": checks.profile_dict(first.profile, first.gpu),
            "resources": resource_names(self.names, self.env, self.keep),
            "explorer": {"image": first.image},
            "tester": {"image": self.tester_image},
            "ttl_seconds": int(self.ttl.total_seconds()),
            "max_minutes": self.max_minutes,
            "keep": self.keep,
            "tags": dict(self.tags),
            "cost": self.estimate(),
            "warnings": self.warnings(),
        }
        if self.wait_for_capacity_s is not None:
            doc["wait_for_capacity_s"] = self.wait_for_capacity_s
        if self.spend_cap is not None:  # beside the ceiling (`cost`)
            doc["max_cost_usd"] = self.spend_cap.cap_usd
        if self.command == "validate":
            doc["pairs"] = [
                {"image": p.image, "gpu": p.gpu, "profile": p.profile.type, "probe_job": p.probe}
                for p in self.pairs
            ]
        return doc


def resource_names(names: naming.RunNames, env: str | None = None, keep: bool = False) -> dict[str, str]:
    """What a run makes: its probe is a job, except a kept run's explorer app (`smi`/`exec` use it)."""
    probe = names.explorer.replace("cuda-explorer-", "cuda-probe-", 1)
    if env is not None:  # the run's own group holds its jobs; the environment is borrowed
        where = naming.EnvNames(env)
        return {
            "resource_group": names.resource_group,
            "environment": where.environment,
            "environment_group": where.resource_group,
            "probe_job": probe,
            "tester_job": names.tester,
        }
    return {
        "resource_group": names.resource_group,
        "environment": names.environment,
        **({"explorer_app": names.explorer} if keep else {"probe_job": probe}),
        "tester_job": names.tester,
    }


# ---- requests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpRequest:
    """The `up` flags as typed; None means "use the setting or default"."""

    location: str | None = None
    gpu: str | None = None
    image: str | None = None
    tester_image: str | None = None
    run_id: str | None = None
    ttl: str | None = None
    max_minutes: int | None = None
    start_timeout: str | None = None
    keep: bool = False
    wait: bool = False
    regions: str | None = None  # --regions R1,R2,...
    strict: bool = False  # --strict: a degraded GPU fails too
    env: str | None = None  # --env NAME: run inside a warm environment
    wait_for_capacity: str | None = None  # --wait-for-capacity DURATION


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
    wait: bool = False
    regions: str | None = None
    strict: bool = False
    env: str | None = None
    wait_for_capacity: str | None = None  # --wait-for-capacity DURATION


def option_text(value: str | None, flag: str) -> str | None:
    """None stays None (use the default); an empty or blank value is an error, never a default."""
    if value is None:
        return None
    if not value.strip():
        raise BadInput(f"{flag} is empty: give a value or leave the flag out")
    return value.strip()


def _image(ref: str, flag: str) -> tuple[str, ImageRef]:
    try:
        return ref.strip(), parse_image_ref(ref)
    except BadInput as exc:
        raise BadInput(f"{flag}: {exc.message}") from exc


def _profile(alias: str) -> checks.Profile:
    return checks.resolve_profile(alias)


def _duration(value: str, flag: str) -> timedelta:
    try:
        return naming.parse_ttl(value)
    except BadInput as exc:
        raise BadInput(f"{flag}: {exc.message}") from exc


def wait_bound(value: str | None) -> float | None:
    """--wait-for-capacity DURATION in seconds (waiting.py checks it)."""
    return waiting.bound_of(option_text(value, "--wait-for-capacity"))


def _minutes(value: int | None, default: int) -> int:
    minutes = default if value is None else value
    if not 1 <= minutes <= 24 * 60:
        raise BadInput(f"invalid --max-minutes {minutes}: use 1 to 1440")
    return minutes


def _common(
    settings: Settings, run_id: str | None, location: str | None, ttl: str | None
) -> tuple[str, naming.RunNames, str, timedelta]:
    rid = option_text(run_id, "--run-id")
    run = naming.validate_run_id(rid) if rid else naming.new_run_id()
    names = naming.RunNames(run).validate()
    where = naming.validate_location(option_text(location, "--location") or settings.location)
    expiry = _duration(option_text(ttl, "--ttl") or settings.ttl, "--ttl")
    return run, names, where, expiry


def _regions(
    settings: Settings,
    flag: str | None,
    location_flag: str | None,
    location: str,
    profiles: list[checks.Profile],
) -> tuple[str, ...]:
    """--regions > the `regions` setting (config key or ACAGPU_REGIONS) > failover's default order."""
    text = option_text(flag, "--regions")
    if text is not None and location_flag is not None:
        raise BadInput(
            "give -l/--location or --regions, not both (the first of --regions is where it starts)"
        )
    raw: list[str] = []
    if text is not None:
        raw = text.split(",")
    elif settings.regions and location_flag is None:
        raw = list(settings.regions)
    if not raw:
        return failover.default_regions(location, [p.type for p in profiles], location_flag is not None)
    parts = [r.strip() for r in raw]
    if not all(parts):
        raise BadInput(
            f"--regions {','.join(raw)!r}: an empty region; separate regions by commas, e.g. eastus,westus3"
        )
    regions = tuple(naming.validate_location(r) for r in parts)
    if len(set(regions)) != len(regions):
        raise BadInput(f"--regions {','.join(raw)!r} names a region twice")
    if len(regions) > failover.MAX_REGIONS:
        raise BadInput(f"--regions names {len(regions)} regions; at most {failover.MAX_REGIONS}")
    return regions


def make_up_plan(settings: Settings, request: UpRequest, *, owner: str) -> Plan:
    """Validate every `up` value (one-line BadInput on the first bad one) and derive names and tags."""
    run_id, names, location, ttl = _common(settings, request.run_id, request.location, request.ttl)
    gpus = _gpu_list(option_text(request.gpu, "--gpu") or settings.gpu)
    gpu = gpus[0]
    profile = _profile(gpu)
    image, ref = _image(option_text(request.image, "--image") or settings.image, "--image")
    tester_image, _ = _image(
        option_text(request.tester_image, "--tester-image") or checks.default_tester_image(), "--tester-image"
    )
    start = option_text(request.start_timeout, "--start-timeout") or DEFAULT_START_TIMEOUT
    pair = Pair(
        1,
        image,
        ref,
        gpu,
        profile,
        naming.validate_workload_profile_name(GPU_PROFILE_NAME),
        names.explorer,
        names.tester,
    )
    regions = _regions(settings, request.regions, request.location, location, [profile])
    fallbacks = tuple(
        (region, replace(pair, gpu=alias, profile=_profile(alias)))
        for alias in gpus[1:]
        for region in _regions(settings, request.regions, request.location, location, [_profile(alias)])
    )
    # --keep only skips teardown now; the TTL still applies, so the reaper removes a forgotten run.
    # (acagpu:keep=true, which the reaper honours, is set deliberately by a person, never implied.)
    return Plan(
        command="up",
        run_id=run_id,
        names=names,
        pairs=(pair,),
        tester_image=tester_image,
        ttl=ttl,
        max_minutes=_minutes(request.max_minutes, DEFAULT_MAX_MINUTES),
        start_timeout_s=_duration(start, "--start-timeout").total_seconds(),
        owner=owner,
        tags=naming.run_tags(run_id, owner=owner, ttl=ttl, gpu=gpu),  # a fallback's: for_attempt
        keep=request.keep,
        wait_gone=request.wait,
        strict=request.strict,
        location=regions[0],
        regions=regions,
        fallbacks=fallbacks,
        env=_env(settings, request.env, request.keep),
        wait_for_capacity_s=wait_bound(request.wait_for_capacity),
    )


def _gpu_list(text: str) -> list[str]:
    """`a100,t4`: A100, else T4. Each alias once; every alias a known GPU (BadInput names it)."""
    aliases = [a.strip().lower() for a in text.split(",")]
    if any(not a for a in aliases):
        raise BadInput(f"--gpu {text!r} names an empty GPU")
    twice = sorted({a for a in aliases if aliases.count(a) > 1})
    if twice:
        raise BadInput(f"--gpu names {', '.join(twice)} twice")
    for alias in aliases:
        _profile(alias)
    return aliases


def _env(settings: Settings, flag: str | None, keep: bool) -> str | None:
    """--env (or the `env` setting): the warm environment a run borrows; None runs cold."""
    name = option_text(flag, "--env") or settings.env
    if name is None:
        return None
    if keep:
        raise BadInput(
            "--keep with --env: a run in a warm environment has nothing to keep (its jobs bill nothing "
            "idle); the environment itself stays"
        )
    return naming.validate_env_name(name)


def make_plan(settings: Settings, request: UpRequest, *, owner: str) -> Plan:
    """`up`'s plan (the name the CLI and older callers use)."""
    return make_up_plan(settings, request, owner=owner)


def _profile_name(alias: str) -> str:
    """Workload profile names stay short: the type string as a name is WorkloadProfileInvalidNameTooLong."""
    return naming.validate_workload_profile_name("gpu-" + "".join(ch for ch in alias if ch.isalnum())[:11])


def make_validate_plan(settings: Settings, request: ValidateRequest, *, owner: str) -> Plan:
    """Every (image, GPU) pair, checked before any cloud call: bad input creates nothing (exit 2)."""
    if not request.images or not request.gpus:
        raise BadInput("give at least one --image and one --gpu")
    images = dict.fromkeys(option_text(i, "--image") or "" for i in request.images)
    parsed = {image: _image(image, "--image")[1] for image in images}
    gpus = tuple(dict.fromkeys((option_text(g, "--gpu") or "").lower() for g in request.gpus))
    profiles = {gpu: _profile(gpu) for gpu in gpus}
    if len(images) * len(gpus) > MAX_PAIRS:
        raise BadInput(f"{len(images) * len(gpus)} pairs requested; at most {MAX_PAIRS} per validation")
    run_id, names, location, ttl = _common(settings, request.run_id, request.location, request.ttl)
    tester_image, _ = _image(
        option_text(request.tester_image, "--tester-image") or checks.default_tester_image(), "--tester-image"
    )
    driver = option_text(request.driver, "--driver")
    if driver:
        try:
            cuda_compat.parse_driver_version(driver)
        except BadInput as exc:
            raise BadInput(f"--driver: {exc.message}") from exc
    pairs = []
    for index, (image, gpu) in enumerate(((i, g) for i in images for g in gpus), start=1):
        explorer = naming.validate_aca_name(f"{names.explorer}-{index}", "app")
        tester = naming.validate_aca_name(f"{names.tester}-{index}", "job")
        pairs.append(
            Pair(index, image, parsed[image], gpu, profiles[gpu], _profile_name(gpu), explorer, tester)
        )
    regions = _regions(settings, request.regions, request.location, location, list(profiles.values()))
    start = option_text(request.start_timeout, "--start-timeout") or VALIDATE_START_TIMEOUT
    return Plan(
        command="validate",
        run_id=run_id,
        names=names,
        pairs=tuple(pairs),
        tester_image=tester_image,
        ttl=ttl,
        max_minutes=_minutes(request.max_minutes, VALIDATE_MAX_MINUTES),
        start_timeout_s=_duration(start, "--start-timeout").total_seconds(),
        owner=owner,
        # every GPU of the run is named, so status and reap price all of them
        tags=naming.run_tags(run_id, owner=owner, ttl=ttl, gpu=",".join(gpus)),
        run_tester=request.run_tester,
        wait_gone=request.wait,
        strict=request.strict,
        driver=driver,
        location=regions[0],
        regions=regions,
        env=_env(settings, request.env, False),
        wait_for_capacity_s=wait_bound(request.wait_for_capacity),
    )


def make_test_plan(
    run_id: str,
    location: str,
    gpu: str,
    tags: dict[str, str],
    *,
    owner: str,
    start_timeout_s: float,
    timeout_s: float,
) -> Plan:
    """`acagpu test`: the tester alone, on the pair of a run that already exists (nothing created)."""
    names = naming.RunNames(run_id)
    profile = _profile(gpu)
    image = checks.default_tester_image()
    pair = Pair(
        1, image, parse_image_ref(image), gpu, profile, GPU_PROFILE_NAME, names.explorer, names.tester
    )
    return Plan(
        command="test",
        run_id=run_id,
        names=names,
        location=location,
        pairs=(pair,),
        tester_image=image,
        ttl=timedelta(0),
        max_minutes=max(1, int(timeout_s // 60)),
        start_timeout_s=start_timeout_s,
        owner=owner,
        tags=dict(tags),
        probe=False,
        existing=True,
    )


def with_pairs(plan: Plan, pairs: Sequence[Pair]) -> Plan:
    return replace(plan, pairs=tuple(pairs))
