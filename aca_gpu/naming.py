"""Run ids, resource names and tags: validated before any Azure call so bad input creates nothing."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aca_gpu.errors import BadInput

TAG_MANAGED = "acagpu:managed"
TAG_RUN_ID = "acagpu:run-id"
TAG_CREATED_AT = "acagpu:created-at"
TAG_EXPIRES_AT = "acagpu:expires-at"
TAG_OWNER = "acagpu:owner"
TAG_KEEP = "acagpu:keep"
TAG_GPU = "acagpu:gpu"
TAG_KIND = "acagpu:kind"  # "env" on a warm environment's group (`acagpu env create`), which is no run
TAG_ENV = "acagpu:env"  # on a run's jobs inside a warm environment: the environment's name
TAG_IDLE_TTL = "acagpu:idle-ttl"  # a warm environment's idle TTL in seconds; expires-at renews by it
TAG_LAST_USED = "acagpu:last-used"
KIND_ENV = "env"
TAG_QUEUE = "acagpu:queue"  # on a queue run's Event job: its account, items, workers (queue/spec.py)
TAG_SHARDS = "acagpu:shards"  # on a fan-out's job: how many shards it starts (`status` counts them)
TAG_SERVED = "acagpu:served"  # on a served run's group: its app (teardown scales it to 0 first)
TAG_MAX_COST = "acagpu:max-cost"  # a run's --max-cost in USD (`cost` sets it beside the bill)
TAG_ROLE = "acagpu:role"  # "guard" on the guard's own group (`acagpu guard install`), which is no run

ACA_NAME_RE = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$")
ACA_NAME_MAX = 32
RG_NAME_RE = re.compile(r"^[-\w._()]+$")
RG_NAME_MAX = 90
LOCATION_RE = re.compile(r"^[a-z][a-z0-9]{2,30}$")
TTL_RE = re.compile(r"^(\d+)([smhd])$")
_TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def new_run_id() -> str:
    """Six hex characters, starting with a letter so every derived name is valid."""
    while True:
        rid = secrets.token_hex(3)
        if rid[0].isalpha():
            return rid


def validate_run_id(run_id: str) -> str:
    if not re.fullmatch(r"[a-z0-9]{1,12}", run_id):
        raise BadInput(f"invalid run id {run_id!r}: use 1-12 lowercase letters or digits")
    return run_id


# Azure regions (public, US Gov, China) as `az account list-locations` names them; a region that is
# not here is refused where only a real region makes sense (`profiles -l`, `ci init -l`).
AZURE_REGIONS = frozenset(
    """
    australiacentral australiacentral2 australiaeast australiasoutheast austriaeast belgiumcentral
    brazilsouth brazilsoutheast canadacentral canadaeast centralindia centralus centraluseuap
    chilecentral chinaeast chinaeast2 chinaeast3 chinanorth chinanorth2 chinanorth3 denmarkeast eastasia
    eastus eastus2 eastus2euap francecentral francesouth germanynorth germanywestcentral
    indonesiacentral israelcentral italynorth japaneast japanwest jioindiacentral jioindiawest
    koreacentral koreasouth malaysiawest mexicocentral newzealandnorth northcentralus northeurope
    norwayeast norwaywest polandcentral qatarcentral southafricanorth southafricawest southcentralus
    southeastasia southindia spaincentral swedencentral swedensouth switzerlandnorth switzerlandwest
    uaecentral uaenorth uksouth ukwest usdodcentral usdodeast usgovarizona usgovtexas usgovvirginia
    westcentralus westeurope westindia westus westus2 westus3
    """.split()  # noqa: SIM905
)


def validate_region(location: str) -> str:
    """A known Azure region (short or display form); an unknown one names a few that are close."""
    short = validate_location(location)
    if short not in AZURE_REGIONS:
        close = sorted(r for r in AZURE_REGIONS if r[:4] == short[:4])[:4]
        also = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BadInput(f"unknown Azure region {location!r}{also}: see `az account list-locations -o table`")
    return short


def validate_location(location: str) -> str:
    """Accept 'eastus' or 'East US'; return the ARM short form."""
    short = location.replace(" ", "").lower()
    if not LOCATION_RE.fullmatch(short):
        raise BadInput(f"invalid location {location!r}: expected an Azure region name such as 'eastus'")
    return short


# A workload profile's name inside an environment. Azure refuses the 24-character type string as a
# name (WorkloadProfileInvalidNameTooLong, azure-cli#31239); its exact limit is not published, so
# acagpu keeps names to 15 characters, which every accepted name seen so far fits.
WORKLOAD_PROFILE_NAME_MAX = 15
WORKLOAD_PROFILE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def validate_workload_profile_name(name: str) -> str:
    if len(name) > WORKLOAD_PROFILE_NAME_MAX:
        raise BadInput(
            f"workload profile name {name!r} is too long: {len(name)} > {WORKLOAD_PROFILE_NAME_MAX} "
            "characters (Azure refuses long names with WorkloadProfileInvalidNameTooLong)"
        )
    if not WORKLOAD_PROFILE_NAME_RE.fullmatch(name) or name.endswith("-"):
        raise BadInput(
            f"invalid workload profile name {name!r}: letters, digits and hyphens, starting with a letter"
        )
    return name


def validate_aca_name(name: str, what: str = "name") -> str:
    if len(name) > ACA_NAME_MAX:
        raise BadInput(f"{what} {name!r} is too long: {len(name)} > {ACA_NAME_MAX} characters")
    if not ACA_NAME_RE.fullmatch(name) or "--" in name:
        raise BadInput(
            f"invalid {what} {name!r}: lowercase letters, digits and single hyphens, starting with a letter"
        )
    return name


def validate_rg_name(name: str) -> str:
    if len(name) > RG_NAME_MAX or not RG_NAME_RE.fullmatch(name) or name.endswith("."):
        raise BadInput(f"invalid resource group name {name!r}")
    return name


MAX_DURATION = timedelta(days=3650)


def parse_duration(text: str) -> timedelta:
    """'90m', '2h', '1d', '30s' -> timedelta; zero, garbage or more than ten years is bad input.

    The message says what is allowed but not which flag: callers (the CLI's option checks) add that.
    """
    m = TTL_RE.fullmatch(text.strip().lower())
    allowed = "use a positive whole number with s, m, h or d, e.g. 90m or 2h"
    if not m or int(m.group(1)) == 0:
        raise BadInput(f"{text!r} is not a duration: {allowed}")
    seconds = int(m.group(1)) * _TTL_UNITS[m.group(2)]
    if seconds > MAX_DURATION.total_seconds():
        raise BadInput(f"{text!r} is too long: at most {MAX_DURATION.days}d")
    return timedelta(seconds=seconds)


def parse_ttl(text: str, what: str = "TTL") -> timedelta:
    """A duration whose error names what it was for (`--ttl`, `--older-than`, ...)."""
    try:
        return parse_duration(text)
    except BadInput as exc:
        raise BadInput(f"invalid {what}: {exc.message}") from None


def iso_utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso_utc(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class RunNames:
    """Every name a run uses, derived from its id (docs/architecture.md: tags are the source of truth)."""

    run_id: str
    # a run that fails over to another region makes each later attempt in a group of its own
    # (`rg-acagpu-<run>-2`), since the earlier attempt's group may still be deleting
    attempt: int = 1

    @property
    def resource_group(self) -> str:
        suffix = f"-{self.attempt}" if self.attempt > 1 else ""
        return f"rg-acagpu-{self.run_id}{suffix}"

    @property
    def environment(self) -> str:
        return f"cae-acagpu-{self.run_id}"

    @property
    def explorer(self) -> str:
        return f"cuda-explorer-{self.run_id}"

    @property
    def tester(self) -> str:
        return f"gpu-tester-{self.run_id}"

    def validate(self) -> RunNames:
        validate_run_id(self.run_id)
        validate_rg_name(self.resource_group)
        for what, name in (("environment", self.environment), ("app", self.explorer), ("job", self.tester)):
            validate_aca_name(name, what)
        return self


def run_tags(
    run_id: str,
    *,
    owner: str,
    ttl: timedelta,
    now: datetime | None = None,
    keep: bool = False,
    gpu: str | None = None,
) -> dict[str, str]:
    """The tags that make a resource acagpu's: the reaper and `down` trust nothing else."""
    created = now or datetime.now(UTC)
    tags = {
        TAG_MANAGED: "true",
        TAG_RUN_ID: run_id,
        TAG_CREATED_AT: iso_utc(created),
        TAG_EXPIRES_AT: iso_utc(created + ttl),
        TAG_OWNER: owner,
    }
    if keep:
        tags[TAG_KEEP] = "true"
    if gpu:
        tags[TAG_GPU] = gpu
    return tags


def tag_gpus(tags: Mapping[str, str] | None) -> list[str]:
    """Every GPU alias a group's `acagpu:gpu` tag names, in order (empty when untagged)."""
    text = (tags or {}).get(TAG_GPU) or ""
    return [alias.strip().lower() for alias in text.split(",") if alias.strip()]


def tag_gpu(tags: Mapping[str, str] | None) -> str | None:
    """The GPU a run's group was made for. Each failover attempt's group is tagged with the one GPU
    it used; a group made before that carries the whole `--gpu a100,t4` list, read as its first
    alias (the GPU tried first, the most that can be told from the tag), never as an unknown GPU."""
    aliases = tag_gpus(tags)
    return aliases[0] if aliases else None


def with_gpu(tags: Mapping[str, str], gpu: str) -> dict[str, str]:
    """The same tags naming `gpu` (an attempt's own GPU); tags without a GPU tag stay as they are."""
    return {**tags, TAG_GPU: gpu} if TAG_GPU in tags else dict(tags)


def is_managed(tags: dict[str, str] | None) -> bool:
    return bool(tags) and (tags or {}).get(TAG_MANAGED) == "true"


ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,18}[a-z0-9]$|^[a-z]$")


def validate_env_name(name: str) -> str:
    """A warm environment's name: it becomes part of a resource group and an environment name."""
    if not ENV_NAME_RE.match(name) or "--" in name:
        raise BadInput(
            f"invalid environment name {name!r}: use 1-20 lowercase letters, digits and single hyphens, "
            "starting with a letter and not ending with a hyphen"
        )
    return name


@dataclass(frozen=True)
class EnvNames:
    """Where a warm environment lives: its own group, holding one workload-profiles environment."""

    name: str

    @property
    def resource_group(self) -> str:
        return f"rg-acagpu-env-{self.name}"

    @property
    def environment(self) -> str:
        return f"cae-acagpu-env-{self.name}"


def env_tags(
    name: str, *, owner: str, idle_ttl: timedelta, gpus: str, now: datetime | None = None
) -> dict[str, str]:
    """A warm environment's group tags: managed, kind=env, and an expiry renewed on every use."""
    created = now or datetime.now(UTC)
    return {
        TAG_MANAGED: "true",
        TAG_KIND: KIND_ENV,
        TAG_ENV: name,
        TAG_CREATED_AT: iso_utc(created),
        TAG_LAST_USED: iso_utc(created),
        TAG_EXPIRES_AT: iso_utc(created + idle_ttl),
        TAG_IDLE_TTL: str(int(idle_ttl.total_seconds())),
        TAG_OWNER: owner,
        TAG_GPU: gpus,
    }


def renewed_env_tags(tags: dict[str, str], now: datetime | None = None) -> dict[str, str]:
    """The same tags, used now: last-used is now and the expiry one idle TTL from now."""
    when = now or datetime.now(UTC)
    try:
        idle = timedelta(seconds=int(tags.get(TAG_IDLE_TTL, "")))
    except ValueError:
        idle = timedelta(days=7)
    return {**tags, TAG_LAST_USED: iso_utc(when), TAG_EXPIRES_AT: iso_utc(when + idle)}


def is_env_group(tags: dict[str, str] | None) -> bool:
    return is_managed(tags) and (tags or {}).get(TAG_KIND) == KIND_ENV


def logs_workspace_name(environment: str) -> str:
    """The Log Analytics workspace beside an environment (`log-<environment>`, in its group): where
    its runs' console lines stay after their replicas are gone (4-63 letters, digits, hyphens)."""
    return f"log-{environment}"[:63].rstrip("-")


def run_queue_names(run_id: str) -> tuple[str, str, str]:
    """A queue run's three queues in the environment's account: items, results, poison."""
    return f"acagpu-{run_id}", f"acagpu-{run_id}-results", f"acagpu-{run_id}-poison"


def parse_queue_tag(text: str) -> dict[str, str]:
    """The `acagpu:queue` tag of a queue run's Event job (`key=value;...`, queue/spec.py writes it)."""
    pairs = (part.split("=", 1) for part in text.split(";") if "=" in part)
    found = {k.strip(): v.strip() for k, v in pairs}
    if not found.get("account") or not found.get("items", "").isdigit():
        raise ValueError(f"not a queue run's tag: {text[:80]!r}")
    return found
