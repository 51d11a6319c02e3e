"""How an image reaches a replica's node: pulled in full (from where, at what rate), cached, or
streamed. Every choice here is a named model parameter (docs/emulator.md, "Image pulls").

Measured by others: 2.94 GB in 20 s from a same-region registry (~147 MB/s, one pull;
microsoft/azure-container-apps#1763); 3.30 GB in 44-53 s six at once (63-74 MB/s each: ~410 MB/s
shared) and 0 of 6 job executions finding their image cached ("each got a fresh pod"), so by default
nothing is cached (the ACA product team's cold-start benchmark of jobs, June-July 2026); ~7 GB in
~5 min from a remote registry (~23 MB/s); 11 GB in 96 s on a T4 (~115 MB/s, registry not said; a
Sweden Central deployment, 2026-09-18). No link is recorded for the last three: UNCONFIRMED.

UNCONFIRMED, and therefore switches that are off by default:
- `cache`: a node keeps a pulled image for `cache_ttl_s` and a later replica of the same environment
  and profile starts without a pull (7 of 16 *app* replicas did; no job execution did);
- `streaming`: a pull by tag of an image whose ACR streaming artifact is converted (its conversion
  requested on the registry's data plane and finished: providers/registry/streaming.py) reads only what
  the container touches before it starts (`streaming_read_fraction` of the image) — ACR's artifact
  streaming is GA on AKS; whether ACA's serverless GPU pulls use it is not known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aca_gpu.emulator.faults import pull_error_text
from aca_gpu.emulator.providers.registry import sources
from aca_gpu.emulator.state import Environment, Registry, Replica, StagedImage, State
from aca_gpu.emulator.timing import AZURE_2026, image_pull_seconds, image_size_gb

REGISTRY_SUFFIX = ".azurecr.io"
SAME_REGION_SHARED_MB_S = 410.0  # six 3.3 GB pulls at once, 63-74 MB/s each (the ACA team's benchmark)
STREAM_READ_FRACTION = 0.1  # UNCONFIRMED: what a container reads before its first instruction runs
STREAM_OVERHEAD_S = 2.0  # UNCONFIRMED: manifest, streaming artifact and snapshotter set-up
IMPORT_MB_S = 60.0  # UNCONFIRMED: ACR's server-side import from a public registry
CONVERSION_MB_S = 40.0  # UNCONFIRMED: ACR's streaming conversion (minutes for GB images, as reported)


@dataclass(frozen=True)
class PullModel:
    """The emulator's pull parameters (`--pulls cache=on,streaming=on`)."""

    cache: bool = False
    streaming: bool = False
    cache_ttl_s: float = 1800.0

    @classmethod
    def parse(cls, text: str | None) -> PullModel:
        """`cache=on,streaming=off,cache_ttl=600`; an empty text is the default model."""
        values: dict[str, str] = {}
        for part in (text or "").split(","):
            if not part.strip():
                continue
            name, _, value = part.partition("=")
            values[name.strip().lower()] = value.strip().lower()
        unknown = set(values) - {"cache", "streaming", "cache_ttl"}
        if unknown:
            raise ValueError(f"unknown pull model parameter(s): {', '.join(sorted(unknown))}")

        def flag(name: str) -> bool:
            value = values.get(name, "off")
            if value not in ("on", "off", "true", "false", "1", "0"):
                raise ValueError(f"{name}= takes on or off, not {value!r}")
            return value in ("on", "true", "1")

        ttl = float(values.get("cache_ttl", "1800"))
        return cls(cache=flag("cache"), streaming=flag("streaming"), cache_ttl_s=ttl)

    def describe(self) -> str:
        return f"cache={'on' if self.cache else 'off'},streaming={'on' if self.streaming else 'off'}"


def registry_host(image: str) -> str:
    first = image.split("/", 1)[0].lower() if "/" in image else ""
    return first if ("." in first or ":" in first or first == "localhost") else "docker.io"


def node_rate(same_region: bool) -> float:
    """MB/s of one pull on its own."""
    return AZURE_2026["pull_same_region_mb_s" if same_region else "pull_remote_mb_s"]


def shared_rate(same_region: bool, at_once: int) -> float:
    """MB/s of one of `at_once` pulls from the same registry: a same-region registry's bandwidth is
    shared (six at once got 63-74 MB/s each); a remote registry's per-pull rate is the limit."""
    rate = node_rate(same_region)
    if same_region and at_once > 1:
        rate = min(rate, SAME_REGION_SHARED_MB_S / at_once)
    return rate


def full_pull_seconds(
    image: str,
    size_bytes: int | None,
    *,
    same_region: bool,
    at_once: int,
    azure_2026: bool,
    origin: str | None = None,
) -> float:
    """Emulated seconds of a full pull. With the recorded durations: 30-90 s by the image's name
    (`origin`, the public name a staged copy came from), as recorded from public registries; from a
    same-region registry those seconds shrink by the measured ratio of rates (23 MB/s remote to
    147 MB/s, or the shared rate when several pull at once), plus the negotiation's 2 s, so a staged
    copy is faster under both duration sets (UNCONFIRMED for `recorded`: its recordings hold no
    same-region pull)."""
    if not azure_2026:
        public = image_pull_seconds(origin or image)
        if not same_region:
            return public
        ratio = AZURE_2026["pull_remote_mb_s"] / shared_rate(True, at_once)
        return AZURE_2026["pull_overhead"] + public * ratio
    size_mb = (size_bytes / 1e6) if size_bytes else image_size_gb(image) * 1000.0
    return AZURE_2026["pull_overhead"] + size_mb / shared_rate(same_region, at_once)


def streamed_seconds(size_bytes: int, *, same_region: bool) -> float:
    return STREAM_OVERHEAD_S + size_bytes * STREAM_READ_FRACTION / 1e6 / node_rate(same_region)


def import_seconds(size_bytes: int) -> float:
    return 5.0 + size_bytes / 1e6 / IMPORT_MB_S


def conversion_seconds(size_bytes: int) -> float:
    return 30.0 + size_bytes / 1e6 / CONVERSION_MB_S


# ---- one replica's pull ----------------------------------------------------------------------


@dataclass(frozen=True)
class PullPlan:
    """How one container's image reaches the node, decided when its pull begins."""

    seconds: float
    how: str  # pulled | cached | streamed
    size_bytes: int
    host: str
    same_region: bool
    refused: str = ""  # the registry's refusal (no such tag, not authorised): the pull fails


def gpu_driver_text(driver: str) -> str:
    """The `GpuDriverInfo` system event's message, as one serverless T4 deployment saw it (Sweden
    Central, 2026-09-18; no public link recorded: UNCONFIRMED for other regions and GPUs)."""
    return f"pod started, CUDA driver {driver}"


def _staged(states: list[State], image: str) -> tuple[Registry, StagedImage | None, bool] | None:
    """(registry, its image or None, referenced by tag) for an image in an emulated registry."""
    host = registry_host(image)
    if not host.endswith(REGISTRY_SUFFIX):
        return None
    name = host.removesuffix(REGISTRY_SUFFIX)
    for state in states:
        for reg in state.registries.values():
            if reg.name.lower() != name:
                continue
            rest = image.split("/", 1)[1]
            if "@" in rest:
                repo, digest = rest.split("@", 1)
                found = next(
                    (
                        i
                        for t, i in reg.images.items()
                        if t.split(":")[0] == repo.lower() and i.digest == digest
                    ),
                    None,
                )
                return reg, found, False
            return reg, reg.images.get(rest.lower() if ":" in rest else f"{rest.lower()}:latest"), True
    return None


def _may_pull(states: list[State], reg: Registry, principal: str) -> bool:
    """Does the principal hold a role granting the pull on the registry, its group or subscription?"""
    from aca_gpu.emulator.providers.authorization.models import BUILT_IN, allowed

    path = f"/resourcegroups/{reg.rg}/providers/microsoft.containerregistry/registries/{reg.name}".lower()
    for state in states:
        for doc in state.role_assignments.values():
            props = doc["properties"]
            where = str(props.get("scope") or "").lower().rstrip("/")
            below_sub = "/" + where.split("/", 3)[3] if where.count("/") >= 3 else ""
            if props.get("principalId") != principal or not path.startswith(below_sub):
                continue
            guid = str(props["roleDefinitionId"]).rstrip("/").rsplit("/", 1)[-1].lower()
            if guid in BUILT_IN:
                _, actions, not_actions = BUILT_IN[guid]
                perms = [{"actions": actions, "notActions": not_actions}]
            else:
                role = state.role_definitions.get(guid)
                perms = role["properties"]["permissions"] if role else []
            if allowed(perms, "Microsoft.ContainerRegistry/registries/pull/read"):
                return True
    return False


def _puller(runtime: Any, rep: Replica, env: Environment | None, server: str) -> tuple[str, str]:
    """(principal id, how it was named) that the replica's owner pulls from `server` with."""
    owner = runtime.state.jobs.get((rep.rg.lower(), rep.owner.lower())) if rep.kind == "job" else None
    if owner is None and rep.kind == "app":
        owner = runtime.state.apps.get((rep.rg.lower(), rep.owner.lower()))
    config = getattr(owner, "configuration", None) or {}
    entry = next(
        (r for r in config.get("registries") or [] if str(r.get("server") or "").lower() == server), None
    )
    if entry is None:
        return "", "no registries entry"
    identity = str(entry.get("identity") or "")
    if identity.lower() == "system-environment" and env is not None:
        return str(env.identity.get("principalId") or ""), "the environment's identity"
    if identity.lower() == "system" and owner is not None:
        return str(getattr(owner, "identity", {}).get("principalId") or ""), "its own identity"
    return "", f"identity {identity or '(none)'}"


def pull_plan(runtime: Any, rep: Replica, env: Environment | None, image: str) -> PullPlan:
    """Where the image comes from, how long it takes, and whether the registry refuses it."""
    model: PullModel = runtime.pull_model
    clock = runtime.clock
    host = registry_host(image)
    staged = _staged(runtime.peers, image)
    size = image_size_gb(image) * 1e9
    same_region = False
    refused = ""
    origin: str | None = None  # the public name a staged copy came from (its recorded pull time)
    if staged is not None:
        reg, found, by_tag = staged
        same_region = env is not None and reg.location == env.location
        origin = found.source if found is not None else None
        if found is None or clock.now() < found.imported_at:
            refused = f"manifest unknown: {image} is not in registry {reg.name}"
        else:
            size = found.size_bytes
            principal, named = _puller(runtime, rep, env, reg.login_server)
            if not principal or not _may_pull(runtime.peers, reg, principal):
                refused = (
                    f"unauthorized: authentication required ({named} may not pull from {reg.login_server})"
                )
            elif (
                model.streaming
                and by_tag
                and found.streaming_ready_at is not None
                and not found.streaming_fails
                and clock.now() >= found.streaming_ready_at
            ):
                return PullPlan(
                    streamed_seconds(int(size), same_region=same_region),
                    "streamed",
                    int(size),
                    host,
                    same_region,
                )
    else:
        # judged as the registry's importImage judges it: a name no registry has fails its pull
        # (`nvida/cuda:…` as Docker Hub answers it); a registry the emulator does not model is not
        # judged (sources.unchecked)
        judged = sources.pull_refusal(image)
        if judged is not None:
            refused = pull_error_text(judged[0], image)
        if host.endswith(REGISTRY_SUFFIX):
            same_region = True  # an ACR the emulator does not hold: assumed near, as before
            origin = image.split("/", 1)[1]
    if not refused and model.cache and env is not None:
        last = env.pulled.get((rep.profile_type, image))
        if last is not None and clock.emulated(clock.now() - last) <= model.cache_ttl_s:
            return PullPlan(AZURE_2026["pull_cached"], "cached", int(size), host, same_region)
    at_once = 1 + sum(
        1
        for other in runtime.state.replicas()
        if other is not rep
        and other.phase == "PullingImage"
        and any(p.how == "pulled" and p.host == host for p in other.pulls)
    )
    seconds = full_pull_seconds(
        image,
        int(size),
        same_region=same_region,
        at_once=at_once,
        azure_2026=clock.azure_2026,
        origin=origin,
    )
    return PullPlan(seconds, "pulled", int(size), host, same_region, refused)


def pulled_text(runtime: Any, image: str, plan: PullPlan) -> str:
    """The kubelet's own message: `already present on machine` for a cached image; otherwise the
    time taken and, with the aca-2026 durations, the size (newer kubelets print it). A streamed
    pull reads the same as a full one (the snapshotter is below the kubelet): only its speed differs."""
    if plan.how == "cached":
        return f'Container image "{image}" already present on machine'
    seconds = plan.seconds
    text = f'Successfully pulled image "{image}" in {seconds:.3f}s ({seconds:.3f}s including waiting)'
    if runtime.clock.azure_2026:
        text += f". Image size: {plan.size_bytes} bytes."
    return text
