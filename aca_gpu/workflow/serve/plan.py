"""`acagpu serve`'s plan: `run`'s checks of the container (image, command, `-e`, `--secret-env`,
size, registry, place, run id, TTL) plus what serving adds (port, replicas, scale rule, cooldown,
health path, load timeout, measurement), every value checked before anything exists (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.workflow.workload.plan import RunRequest, RunSpec, capped, make_run_spec

DEFAULT_PORT = 8000
DEFAULT_COOLDOWN_S = 300  # ACA's Scale.cooldownPeriod default
DEFAULT_CONCURRENCY = 10  # ACA's HTTP scale rule default (concurrentRequests)
# enough for the slowest start documented for ACA GPUs: ~5.5 min to a running T4 replica, then
# 118 s to the first answer (reference aca-2026 §11-12), with room for a larger model's load
DEFAULT_LOAD_TIMEOUT_S = 1800
# a startup probe spans at most a first look after 60 s and 9 more 240 s apart (ACA's limits:
# initialDelaySeconds 1-60, failureThreshold 1-10, periodSeconds 1-240): 37 min
MAX_LOAD_TIMEOUT_S = 60 + 9 * 240
MAX_REPLICAS_LIMIT = 1000  # ACA's maxReplicas ceiling
TAG_SERVED = naming.TAG_SERVED  # the group of a served run names its app (status, reap, cost read it)


@dataclass(frozen=True)
class ServeRequest:
    """The `serve` flags as typed (None: the setting or default)."""

    image: str | None = None
    command: tuple[str, ...] = ()
    gpu: str | None = None
    location: str | None = None
    run_id: str | None = None
    ttl: str | None = None
    env: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()
    cpu: float | None = None
    memory: str | None = None
    env_name: str | None = None
    mounts: tuple[str, ...] = ()
    port: int = DEFAULT_PORT
    min_replicas: int = 0
    max_replicas: int = 1
    concurrency: int = DEFAULT_CONCURRENCY
    cooldown: int = DEFAULT_COOLDOWN_S
    health: str = "/"
    load_timeout: str | None = None
    measure: int = 0
    requests: int = 0
    request_concurrency: int = 1
    wait_for_capacity: str | None = None  # --wait-for-capacity DURATION (serve/limits.py)
    max_cost: float | None = None  # --max-cost USD (serve/limits.py)


@dataclass(frozen=True)
class ServeSpec:
    """The run's spec (`RunSpec`: plan, container, price) and the app's serving settings."""

    run: RunSpec
    app: str
    port: int
    min_replicas: int
    max_replicas: int
    concurrency: int
    cooldown_s: int
    health: str
    load_timeout_s: int
    measure: int = 0
    requests: int = 0
    request_concurrency: int = 1

    @property
    def run_id(self) -> str:
        return self.run.plan.run_id

    def settings(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "concurrency": self.concurrency,
            "cooldown_seconds": self.cooldown_s,
            "health": self.health,
            "load_timeout_seconds": self.load_timeout_s,
        }

    def as_dict(self) -> dict[str, Any]:
        doc = self.run.as_dict()
        doc.pop("max_minutes", None)
        price = dict(doc.get("price") or {})
        for key in ("ceiling_usd", "ceiling_minutes"):
            price.pop(key, None)
        price["basis"] = str(price.get("basis", "")).split("; ceiling")[0] + "; while a replica runs"
        doc["price"] = price
        doc["app"] = self.app
        doc["settings"] = self.settings()
        resources = dict(doc.get("resources") or {})
        resources.pop("job", None)
        resources["app"] = self.app
        doc["resources"] = resources
        return doc


def app_name(run_id: str) -> str:
    return naming.validate_aca_name(f"serve-{run_id}", "container app")


def _between(value: int, low: int, high: int, flag: str) -> int:
    if not low <= value <= high:
        raise BadInput(f"invalid {flag} {value}: use {low} to {high}")
    return value


def load_seconds(text: str | None) -> int:
    if text is None:
        return DEFAULT_LOAD_TIMEOUT_S
    seconds = int(naming.parse_duration(text).total_seconds())
    if not 1 <= seconds <= MAX_LOAD_TIMEOUT_S:
        raise BadInput(
            f"invalid --load-timeout {text}: ACA's startup probe waits at most "
            f"{MAX_LOAD_TIMEOUT_S // 60} min (a first look after 60 s, then 9 more 240 s apart)"
        )
    return seconds


def make_serve_spec(settings: Settings, request: ServeRequest, *, owner: str) -> ServeSpec:
    """Validate every value (one-line BadInput on the first bad one) before anything exists."""
    if not request.image:
        raise BadInput("IMAGE is required (or --run-id NAME --measure N for an app already served)")
    _between(request.port, 1, 65535, "--port")
    _between(request.max_replicas, 1, MAX_REPLICAS_LIMIT, "--max-replicas")
    _between(request.min_replicas, 0, request.max_replicas, "--min-replicas (at most --max-replicas)")
    _between(request.concurrency, 1, 10000, "--concurrency")
    _between(request.cooldown, 0, 86400, "--cooldown")
    _between(request.measure, 0, 100, "--measure")
    _between(request.requests, 0, 10000, "--requests")
    _between(request.request_concurrency, 1, 256, "--request-concurrency")
    if not request.health.startswith("/") or any(c.isspace() for c in request.health):
        raise BadInput(f"invalid --health {request.health!r}: a path such as /health")
    load = load_seconds(request.load_timeout)
    run = make_run_spec(
        settings,
        RunRequest(
            image=request.image,
            command=request.command,
            gpu=request.gpu,
            location=request.location,
            run_id=request.run_id,
            ttl=request.ttl,
            env=request.env,
            secret_env=request.secret_env,
            cpu=request.cpu,
            memory=request.memory,
            env_name=request.env_name,
            mounts=request.mounts,
            wait_for_capacity=request.wait_for_capacity,
        ),
        owner=owner,
    )
    run = ttl_within_cap(capped(run, request.max_cost), request.max_replicas)
    plan = run.plan
    name = app_name(plan.run_id)
    plan = replace(plan, command="serve", tags={**plan.tags, TAG_SERVED: name})
    return ServeSpec(
        run=replace(run, plan=plan),
        app=name,
        port=request.port,
        min_replicas=request.min_replicas,
        max_replicas=request.max_replicas,
        concurrency=request.concurrency,
        cooldown_s=request.cooldown,
        health=request.health,
        load_timeout_s=load,
        measure=request.measure,
        requests=request.requests,
        request_concurrency=request.request_concurrency,
    )


MIN_CAPPED_TTL = timedelta(minutes=1)


def ttl_within_cap(run: RunSpec, max_replicas: int) -> RunSpec:
    """`serve --max-cost`: once `serve` returns, nothing of it watches the app, so its TTL (what
    `reap` and the guard remove it by) is cut to what the cap pays for at `max_replicas` replicas."""
    cap = run.plan.spend_cap
    if cap is None or cap.usd_per_s <= 0:
        return run
    # at least a minute: a cap that pays for less is kept by serve's own watch while it runs
    paid = max(MIN_CAPPED_TTL, timedelta(seconds=int(cap.cap_usd / (cap.usd_per_s * max_replicas))))
    if paid >= run.plan.ttl:
        return run
    created = naming.parse_iso_utc(run.plan.tags[naming.TAG_CREATED_AT])
    assert created is not None
    tags = {**run.plan.tags, naming.TAG_EXPIRES_AT: naming.iso_utc(created + paid)}
    return replace(run, plan=replace(run.plan, ttl=paid, tags=tags))


ATTACHED_IMAGE = "acagpu/served-app"  # `--run-id NAME --measure N` names no image: the app has one


def attached_spec(settings: Settings, request: ServeRequest, *, owner: str) -> ServeSpec:
    """`serve --run-id NAME --measure N`: the names of a run already served (its group and app);
    the app's own cooldown and port are read from it before measuring. The price is `--gpu`'s."""
    if not request.run_id:
        raise BadInput("--measure without IMAGE needs --run-id NAME (the served app to measure)")
    return make_serve_spec(settings, replace(request, image=ATTACHED_IMAGE), owner=owner)
