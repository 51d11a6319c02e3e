"""`up`'s plan: every flag validated and every name derived before any cloud object exists.

Bad input must create nothing (exit 2), so this module touches no cloud at all; `--dry-run`
prints the plan and stops here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import parse_image_ref
from aca_gpu.workflow import checks

DEFAULT_MAX_MINUTES = 30
DEFAULT_START_TIMEOUT = "15m"
GPU_PROFILE_NAME = "gpu"


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


@dataclass(frozen=True)
class UpPlan:
    run_id: str
    names: naming.RunNames
    location: str
    gpu: str
    profile: checks.Profile
    image: str
    tester_image: str
    ttl: timedelta
    max_minutes: int
    start_timeout_s: float
    keep: bool
    owner: str
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def tester_timeout_s(self) -> int:
        return self.max_minutes * 60

    def estimate(self) -> dict[str, Any]:
        """List-price estimate for the planned run: both replicas billed for the whole deadline."""
        seconds = 2.0 * self.max_minutes * 60
        return checks.cost_estimate(
            self.profile, seconds, self.location, label="upper bound for --max-minutes"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "location": self.location,
            "profile": checks.profile_dict(self.profile, self.gpu),
            "resources": resource_names(self.names),
            "explorer": {"image": self.image},
            "tester": {"image": self.tester_image},
            "ttl_seconds": int(self.ttl.total_seconds()),
            "max_minutes": self.max_minutes,
            "keep": self.keep,
            "tags": dict(self.tags),
            "cost": self.estimate(),
        }


def resource_names(names: naming.RunNames) -> dict[str, str]:
    return {
        "resource_group": names.resource_group,
        "environment": names.environment,
        "explorer_app": names.explorer,
        "tester_job": names.tester,
    }


def make_plan(settings: Settings, request: UpRequest, *, owner: str) -> UpPlan:
    """Validate every value (one-line BadInput on the first bad one) and derive names and tags."""
    run_id = naming.validate_run_id(request.run_id) if request.run_id else naming.new_run_id()
    names = naming.RunNames(run_id).validate()
    location = naming.validate_location(request.location or settings.location)
    gpu = (request.gpu or settings.gpu).strip().lower()
    profile = checks.resolve_profile(gpu)
    ttl = naming.parse_ttl(request.ttl or settings.ttl)
    max_minutes = request.max_minutes if request.max_minutes is not None else DEFAULT_MAX_MINUTES
    if max_minutes < 1 or max_minutes > 24 * 60:
        raise BadInput(f"invalid --max-minutes {max_minutes}: use 1 to 1440")
    start_timeout = naming.parse_ttl(request.start_timeout or DEFAULT_START_TIMEOUT).total_seconds()
    image = _image(request.image or settings.image, "--image")
    tester_image = _image(request.tester_image or checks.default_tester_image(), "--tester-image")
    # --keep only skips teardown now; the TTL still applies, so the reaper removes a forgotten run.
    # (acagpu:keep=true, which the reaper honours, is set deliberately by a person, never implied.)
    tags = naming.run_tags(run_id, owner=owner, ttl=ttl, gpu=gpu)
    return UpPlan(
        run_id=run_id,
        names=names,
        location=location,
        gpu=gpu,
        profile=profile,
        image=image,
        tester_image=tester_image,
        ttl=ttl,
        max_minutes=max_minutes,
        start_timeout_s=start_timeout,
        keep=request.keep,
        owner=owner,
        tags=tags,
    )


def _image(ref: str, flag: str) -> str:
    try:
        parse_image_ref(ref)
    except BadInput as exc:
        raise BadInput(f"{flag}: {exc.message}") from exc
    return ref.strip()
