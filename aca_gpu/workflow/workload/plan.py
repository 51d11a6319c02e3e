"""`acagpu run`'s plan: the user's container (image, command, env, secrets, size, registry) checked
before anything exists, on the engine's `Plan` with one tester-only pair whose job is the workload.

Secrets are read from the local environment here, once, so a missing one is bad input (exit 2)
before anything bills; their values live only in `Workload.secret_values` (kept out of `repr`,
of every document and of the plan's tags), and travel to ACA as secrets that env vars reference.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from aca_gpu import cost, naming
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import parse_image_ref
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.engine import failover
from aca_gpu.workflow.engine.plan import (
    DEFAULT_MAX_MINUTES,
    DEFAULT_START_TIMEOUT,
    GPU_PROFILE_NAME,
    Pair,
    Plan,
    option_text,
    wait_bound,
)

RUNTIMES = ("aca", "docker", "podman", "apptainer")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(Gi)?$")
RESERVED_ENV = ("CONTAINER_APP_", "ACAGPU_")  # set by the platform or by acagpu itself
DOCKER_HUB = "index.docker.io"


LOCAL_SIZE = (
    "not limited: the container takes what this machine's runtime gives it (--cpu/--memory size an "
    "ACA replica)"
)


@dataclass(frozen=True)
class RunRequest:
    """The `run` flags as typed; None means "use the setting or default"."""

    image: str
    command: tuple[str, ...] = ()
    runtime: str = "aca"
    gpu: str | None = None
    location: str | None = None
    regions: str | None = None
    run_id: str | None = None
    ttl: str | None = None
    max_minutes: int | None = None
    start_timeout: str | None = None
    env: tuple[str, ...] = ()  # -e KEY=VALUE
    secret_env: tuple[str, ...] = ()  # --secret-env NAME (value from this environment)
    cpu: float | None = None
    memory: str | None = None
    registry_identity: str | None = None
    registry_username: str | None = None
    registry_password_env: str | None = None
    gpus: str = "all"  # local runtimes: --gpus
    podman_gpu: str = "cdi"
    env_name: str | None = None  # --env NAME: a warm environment (`acagpu env`) instead of a cold one
    mounts: tuple[str, ...] = ()  # --mount SOURCE:/path[:ro]
    create_share: bool = False  # --create-share: make a --mount's share in the warm environment if missing
    wait_for_capacity: str | None = None  # --wait-for-capacity DURATION (ACA only)


@dataclass(frozen=True)
class Registry:
    """Credentials for a private registry: a managed identity, or a user name + a password secret."""

    server: str
    identity: str | None = None
    username: str | None = None
    password_env: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "identity": self.identity,
            "username": self.username,
            "password_env": self.password_env,
        }


@dataclass(frozen=True)
class Mount:
    """A share at a path: an environment storage (Azure Files) on ACA, a host folder locally."""

    source: str
    path: str
    read_only: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "path": self.path, "read_only": self.read_only}


@dataclass(frozen=True)
class Workload:
    """What runs: the values of secrets are here only, and never printed (repr hides them)."""

    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    secrets: Mapping[str, str]  # env var name -> ACA secret name
    cpu: float
    memory_gib: float
    registry: Registry | None = None
    mounts: tuple[Mount, ...] = ()
    secret_values: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    registry_password: str | None = field(default=None, repr=False, compare=False)

    @property
    def memory(self) -> str:
        return f"{self.memory_gib:g}Gi"

    def as_dict(self) -> dict[str, Any]:
        """The document's view: env values the user typed, secret names only."""
        return {
            "image": self.image,
            "command": list(self.command),
            "env": dict(self.env),
            "secret_env": sorted(self.secrets),
            "cpu": self.cpu,
            "memory": self.memory,
            "registry": self.registry.as_dict() if self.registry else None,
            "mounts": [m.as_dict() for m in self.mounts],
        }


@dataclass(frozen=True)
class RunSpec:
    """The engine's plan plus the workload and where it runs."""

    plan: Plan
    workload: Workload
    runtime: str  # aca | docker | podman | apptainer
    gpus: str = "all"
    podman_gpu: str = "cdi"
    warnings: tuple[str, ...] = ()
    create_share: bool = False  # --create-share: the warm environment gets the missing shares
    subscription: str | None = None  # known before the run: the dry run names the storage account

    @property
    def local(self) -> bool:
        return self.runtime != "aca"

    def price(self) -> dict[str, Any]:
        """Per-second price of the replica and the ceiling at --max-minutes (list prices, estimate)."""
        if self.local:
            return {"usd_per_second": 0.0, "ceiling_usd": 0.0, "basis": "this machine: nothing billed"}
        profile = self.plan.pairs[0].profile
        per_second, basis = replica_price(
            profile, self.workload.cpu, self.workload.memory_gib, self.plan.location
        )
        ceiling = per_second * self.plan.max_minutes * 60
        return {
            "usd_per_second": round(per_second, 7),
            "usd_per_hour": round(per_second * 3600, 4),
            "ceiling_usd": round(ceiling, 4),
            "ceiling_minutes": self.plan.max_minutes,
            "basis": f"{basis}; ceiling = {self.plan.max_minutes} min (--max-minutes); estimate",
            # --max-cost, beside the ceiling
            **({"max_cost_usd": self.plan.spend_cap.cap_usd} if self.plan.spend_cap is not None else {}),
        }

    def as_dict(self) -> dict[str, Any]:
        """The `--dry-run` document (and the plan part of the run's document)."""
        plan, pair = self.plan, self.plan.pairs[0]
        doc: dict[str, Any] = {
            "run_id": plan.run_id,
            "runtime": self.runtime,
            "workload": self.workload.as_dict(),
            "max_minutes": plan.max_minutes,
            "price": self.price(),
            "warnings": list(self.warnings),
        }
        if plan.wait_for_capacity_s is not None:
            doc["wait_for_capacity_s"] = plan.wait_for_capacity_s
        if self.create_share and plan.env is not None:
            doc["create_share"] = self.share_plan(plan.env)
        if self.local:
            doc.update({"location": "local", "gpus": self.gpus, "container": pair.tester})
            # an ACA replica's size: a local container is given no limit, so none is claimed
            doc["workload"].update({"cpu": None, "memory": None, "size": LOCAL_SIZE})
        else:
            doc.update(
                {
                    "location": plan.location,
                    "regions": list(plan.region_order),
                    "profile": checks.profile_dict(pair.profile, pair.gpu),
                    "env": plan.env,
                    "resources": {
                        "resource_group": plan.names.resource_group,
                        "environment": plan.names.environment,
                        "job": pair.tester,
                    }
                    if plan.env is None
                    else {
                        "resource_group": plan.names.resource_group,  # the run's own, holding its job
                        "environment": naming.EnvNames(plan.env).environment,
                        "environment_group": naming.EnvNames(plan.env).resource_group,
                        "job": pair.tester,
                    },
                    "ttl_seconds": int(plan.ttl.total_seconds()),
                    "tags": dict(plan.tags),
                }
            )
        return doc

    def share_plan(self, env_name: str) -> dict[str, Any]:
        """What `--create-share` makes when the environment lacks a storage (each is read first)."""
        from aca_gpu.workflow.env import shares

        env = naming.EnvNames(env_name)
        account = shares.account_name(self.subscription, env_name) if self.subscription else None
        return {
            "resource_group": env.resource_group,
            "storage_account": account,
            "account_basis": "acagpu + the environment's name + a hash of the subscription and environment",
            "sku": "Standard_LRS",
            "kind": "StorageV2",
            "shares": [
                {"name": m.source, "quota_gib": shares.SHARE_QUOTA_GIB, "access_mode": "ReadWrite"}
                for m in self.workload.mounts
            ],
            "only_if_missing": True,
            "kept_with": f"environment {env_name} (removed by `acagpu env delete {env_name}`)",
        }


def capped(spec: RunSpec, usd: float | None) -> RunSpec:
    """The run capped at `usd` (--max-cost; None: uncapped), priced as its replica is."""
    if usd is None:
        return spec
    if spec.local:
        raise BadInput(f"--max-cost caps what ACA bills; `{spec.runtime}` bills nothing")
    work, pair = spec.workload, spec.plan.pairs[0]
    per_s, _ = replica_price(pair.profile, work.cpu, work.memory_gib, spec.plan.location)
    return replace(spec, plan=spec.plan.with_max_cost(usd, per_s))


def replica_price(
    profile: checks.Profile, cpu: float, memory_gib: float, location: str | None = None
) -> tuple[float, str]:
    """USD per second of one replica: GPU + vCPU + GiB meters (serverless) or node + management."""
    return cost.replica_rate(profile, cpu, memory_gib, location=location)


# ---- checks -----------------------------------------------------------------------------------


def _env_name(name: str, flag: str) -> str:
    if not ENV_NAME_RE.fullmatch(name):
        raise BadInput(f"{flag} {name!r}: an environment variable name is letters, digits and _ (not first)")
    if name.upper().startswith(RESERVED_ENV):
        raise BadInput(f"{flag} {name!r}: names starting with {' or '.join(RESERVED_ENV)} are reserved")
    return name


def parse_env(items: tuple[str, ...]) -> dict[str, str]:
    """`-e KEY=VALUE` (repeatable): a KEY twice is an error, never "the last one wins"."""
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise BadInput(
                f"-e {item!r}: expected KEY=VALUE",
                hint="a value from this machine's environment goes through --secret-env NAME",
            )
        _env_name(name, "-e")
        if name in env:
            raise BadInput(f"-e {name} is given twice")
        env[name] = value
    return env


def secret_name(env_name: str) -> str:
    """ACA secret names: lowercase letters, digits and '-', starting and ending alphanumeric."""
    return "env-" + env_name.lower().replace("_", "-").strip("-")


def parse_secrets(names: tuple[str, ...], env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(env var -> secret name, env var -> value) for --secret-env; a missing or empty one is bad input."""
    refs: dict[str, str] = {}
    values: dict[str, str] = {}
    for raw in names:
        name = _env_name(raw.strip(), "--secret-env")
        if name in refs:
            raise BadInput(f"--secret-env {name} is given twice")
        if name in env:
            raise BadInput(f"{name} is given with both -e and --secret-env: choose one")
        value = os.environ.get(name)
        if not value:
            raise BadInput(
                f"--secret-env {name}: {name} is not set in this environment (or is empty)",
                hint=f"export {name}=... first; its value is sent as an ACA secret, never printed",
            )
        secret = secret_name(name)
        if secret in refs.values():
            raise BadInput(f"--secret-env {name}: another name maps to the same secret {secret!r}")
        refs[name], values[name] = secret, value
    return refs, values


def parse_memory(value: str) -> float:
    match = MEMORY_RE.fullmatch(value.strip())
    if not match:
        raise BadInput(f"--memory {value!r}: give GiB like 16Gi or 16")
    return float(match.group(1))


def _size(request: RunRequest, profile: checks.Profile) -> tuple[float, float]:
    """--cpu/--memory, default the profile's whole replica; more than the replica has is refused."""
    cpu = float(profile.container_cpu) if request.cpu is None else float(request.cpu)
    memory = float(profile.container_memory_gib) if request.memory is None else parse_memory(request.memory)
    if request.runtime != "aca":
        return cpu, memory
    if not 0 < cpu <= profile.container_cpu:
        raise BadInput(
            f"--cpu {cpu:g}: {profile.type} gives a container up to {profile.container_cpu:g} vCPU"
        )
    if not 0 < memory <= profile.container_memory_gib:
        raise BadInput(
            f"--memory {memory:g}Gi: {profile.type} gives a container up to {profile.container_memory_gib}Gi"
        )
    return cpu, memory


def _registry(request: RunRequest, image: str) -> tuple[Registry | None, str | None]:
    identity = option_text(request.registry_identity, "--registry-identity")
    user = option_text(request.registry_username, "--registry-username")
    password_env = option_text(request.registry_password_env, "--registry-password-env")
    if identity and (user or password_env):
        raise BadInput("give --registry-identity or --registry-username/--registry-password-env, not both")
    if bool(user) != bool(password_env):
        raise BadInput("--registry-username and --registry-password-env go together")
    if not (identity or user):
        return None, None
    ref = parse_image_ref(image)
    server = DOCKER_HUB if ref.registry in ("docker.io", "registry-1.docker.io") else ref.registry
    password = None
    if password_env:
        _env_name(password_env, "--registry-password-env")
        password = os.environ.get(password_env)
        if not password:
            raise BadInput(f"--registry-password-env {password_env}: {password_env} is not set (or is empty)")
    return Registry(server, identity, user, password_env), password


STORAGE_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
SHARE_RE = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,30}[a-z0-9]$")  # an Azure Files share and a storage name


def parse_mounts(
    items: tuple[str, ...], *, local: bool, env_name: str | None, create_share: bool = False
) -> tuple[Mount, ...]:
    """`--mount SOURCE:/path[:ro]`: an environment storage on ACA (needs --env), a folder locally;
    with `--create-share` (ACA, --env only) SOURCE is also the Azure Files share made when missing."""
    if create_share and not local:
        if env_name is None:
            raise BadInput(
                "--create-share needs --env NAME: a cold run's resource group is deleted after the run, "
                "so the files of a share made there would be lost",
                hint="make a warm environment that keeps it: acagpu env create NAME -l REGION, "
                "then run --env NAME --mount SHARE:/path --create-share",
            )
        if not items:
            raise BadInput("--create-share makes the shares of --mount: add --mount SHARE:/path")
    found: list[Mount] = []
    for item in items:
        parts = item.split(":")
        read_only = len(parts) == 3 and parts[2] == "ro"
        if len(parts) not in (2, 3) or (len(parts) == 3 and not read_only) or not parts[0]:
            raise BadInput(f"--mount {item!r}: expected SOURCE:/path or SOURCE:/path:ro")
        source, path = parts[0], parts[1]
        if not path.startswith("/") or path == "/":
            raise BadInput(f"--mount {item!r}: the path in the container must be absolute, e.g. /data")
        if any(m.path == path for m in found):
            raise BadInput(f"--mount: {path} is mounted twice")
        if local:
            folder = os.path.abspath(os.path.expanduser(source))
            if not os.path.isdir(folder):
                raise BadInput(f"--mount {item!r}: {folder} is not a folder on this machine")
            source = folder
        elif env_name is None:
            raise BadInput(
                f"--mount {item!r} on ACA needs --env NAME: a run-scoped environment has no storage",
                hint="add an Azure Files share to a warm environment (`az containerapp env storage set`)",
            )
        elif not STORAGE_RE.match(source):
            raise BadInput(f"--mount {item!r}: {source!r} is not an environment storage name")
        elif create_share and not SHARE_RE.match(source):
            raise BadInput(
                f"--mount {item!r} --create-share: a share name is 3-32 lowercase letters, digits and "
                "single hyphens, starting and ending with a letter or digit"
            )
        elif read_only:
            raise BadInput(
                f"--mount {item!r}: on ACA a share is read-only by its environment storage, not per run",
                hint="define the storage with --access-mode ReadOnly (`az containerapp env storage set`)",
            )
        found.append(Mount(source, path, read_only))
    return tuple(found)


def make_run_spec(settings: Settings, request: RunRequest, *, owner: str) -> RunSpec:
    """Validate every `run` value (one-line BadInput on the first bad one) before anything exists."""
    if request.runtime not in RUNTIMES:
        raise BadInput(f"--runtime {request.runtime!r}: choose one of {', '.join(RUNTIMES)}")
    image_text = option_text(request.image, "IMAGE") or ""
    try:
        parse_image_ref(image_text)
    except BadInput as exc:
        raise BadInput(f"IMAGE: {exc.message}") from exc
    if any(not part for part in request.command[:1]):
        raise BadInput("the COMMAND after -- is empty: give a program, e.g. -- nvidia-smi")
    rid = option_text(request.run_id, "--run-id")
    run_id = naming.validate_run_id(rid) if rid else naming.new_run_id()
    names = naming.RunNames(run_id).validate()
    job = naming.validate_aca_name(f"run-{run_id}", "job")
    location = naming.validate_location(option_text(request.location, "--location") or settings.location)
    ttl_text = option_text(request.ttl, "--ttl") or settings.ttl
    ttl = naming.parse_ttl(ttl_text, "--ttl")
    gpu = (option_text(request.gpu, "--gpu") or settings.gpu).lower()
    profile = checks.resolve_profile(gpu)
    minutes = DEFAULT_MAX_MINUTES if request.max_minutes is None else request.max_minutes
    if not 1 <= minutes <= 24 * 60:
        raise BadInput(f"invalid --max-minutes {minutes}: use 1 to 1440")
    start = naming.parse_duration(
        option_text(request.start_timeout, "--start-timeout") or DEFAULT_START_TIMEOUT
    )
    env = parse_env(request.env)
    secrets, values = parse_secrets(request.secret_env, env)
    cpu, memory = _size(request, profile)
    registry, password = _registry(request, image_text)
    warnings: list[str] = []
    env_name = option_text(request.env_name, "--env") or settings.env
    if env_name is not None:
        naming.validate_env_name(env_name)
        if request.runtime != "aca":
            warnings.append(f"--env {env_name} is a warm environment on ACA; `{request.runtime}` needs none")
            env_name = None
        elif request.regions is not None or request.location is not None:
            raise BadInput("--env runs where the environment is: leave out -l/--location and --regions")
    if registry is not None and request.runtime != "aca":
        warnings.append(
            f"--registry-* apply on ACA; here `{request.runtime}` uses its own login "
            f"(`{request.runtime} login {registry.server}`)"
        )
        registry, password = None, None
    regions: tuple[str, ...] = (location,)
    if request.regions is not None:
        if request.location is not None:
            raise BadInput(
                "give -l/--location or --regions, not both (the first of --regions is where it starts)"
            )
        parts = [r.strip() for r in request.regions.split(",")]
        if not all(parts):
            raise BadInput(f"--regions {request.regions!r}: an empty region; separate regions by commas")
        regions = tuple(dict.fromkeys(naming.validate_location(r) for r in parts))
        if len(regions) > failover.MAX_REGIONS:
            raise BadInput(f"--regions names {len(regions)} regions; at most {failover.MAX_REGIONS}")
    if request.create_share and request.runtime != "aca":
        warnings.append(f"--create-share makes Azure Files shares on ACA; `{request.runtime}` mounts folders")
    mounts = parse_mounts(
        request.mounts, local=request.runtime != "aca", env_name=env_name, create_share=request.create_share
    )
    pair = Pair(1, image_text, parse_image_ref(image_text), gpu, profile, GPU_PROFILE_NAME, "", job)
    if request.runtime != "aca":
        pair = Pair(
            1, image_text, parse_image_ref(image_text), "local", profile, "local", "", f"acagpu-{run_id}-run"
        )
    tags = naming.run_tags(run_id, owner=owner, ttl=ttl, gpu=gpu)
    plan = Plan(
        command="run",
        run_id=run_id,
        names=names,
        location=regions[0] if request.runtime == "aca" else "local",
        pairs=(pair,),
        tester_image=image_text,
        ttl=ttl if request.runtime == "aca" else timedelta(0),
        max_minutes=minutes,
        start_timeout_s=start.total_seconds(),
        owner=owner,
        tags=tags,
        probe=False,
        regions=regions if request.runtime == "aca" else (),
        env=env_name,
        wait_for_capacity_s=wait_bound(request.wait_for_capacity),
    )
    if plan.wait_for_capacity_s is not None and request.runtime != "aca":
        raise BadInput(f"--wait-for-capacity waits for ACA's capacity; `{request.runtime}` has none")
    workload = Workload(
        image=image_text,
        command=tuple(request.command),
        env=env,
        secrets=secrets,
        cpu=cpu,
        memory_gib=memory,
        registry=registry,
        mounts=mounts,
        secret_values=values,
        registry_password=password,
    )
    return RunSpec(
        plan,
        workload,
        request.runtime,
        request.gpus,
        request.podman_gpu,
        tuple(warnings),
        create_share=request.create_share and request.runtime == "aca",
        subscription=settings.subscription,
    )
