"""Container registries: the rules, on the shared state.

As Microsoft.ContainerRegistry does: a registry name is 5-50 letters and digits and unique across
Azure (checkNameAvailability answers `AlreadyExists` for a name held anywhere; a PUT of a name held
in another subscription or group is 409 `AlreadyInUse`); SKUs Basic, Standard, Premium; a create
takes a few seconds. An import copies `source.sourceImage` from `source.registryUri` into
`targetTags` server-side (no Docker); it fails for an image the emulator's image model says does
not exist (the `pull` fault naming it, or a deprecated `latest` tag of nvidia/cuda). A Premium
registry converts an imported image into a streaming artifact when asked (streaming.py).
A registry goes with its group.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from aca_gpu.emulator import pulls
from aca_gpu.emulator.arm import ArmError, ConflictError, iso_z, resource_not_found, utc_now
from aca_gpu.emulator.catalog import normalize_location
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.registry import sources
from aca_gpu.emulator.providers.resources import models as rg_models
from aca_gpu.emulator.state import Registry, StagedImage, key
from aca_gpu.emulator.timing import image_size_gb

NS = "Microsoft.ContainerRegistry"
NAME_RE = re.compile(r"^[a-zA-Z0-9]{5,50}$")
SKUS = ("Basic", "Standard", "Premium")
CREATE_S = 10.0
ACR_PULL_ROLE = "7f951dda-4ed3-4680-a7ca-43fe172d538d"  # AcrPull, a built-in role
PULL_ACTION = "Microsoft.ContainerRegistry/registries/pull/read"


def registry_id(ctx: Ctx, reg: Registry) -> str:
    return f"/subscriptions/{ctx.subscription}/resourceGroups/{reg.rg}/providers/{NS}/registries/{reg.name}"


def holder(ctx: Ctx, name: str) -> tuple[Ctx, Registry] | None:
    """Who holds a registry name in any emulated subscription (the names are global, any case)."""
    for sub in (ctx.fleet or {ctx.subscription: ctx}).values():
        for reg in sub.state.registries.values():
            if reg.name.lower() == name.lower():
                return sub, reg
    return None


def by_login_server(ctx: Ctx, server: str) -> tuple[Ctx, Registry] | None:
    name = server.lower().removesuffix(pulls.REGISTRY_SUFFIX)
    return holder(ctx, name) if server.lower().endswith(pulls.REGISTRY_SUFFIX) else None


def find(ctx: Ctx, rg: str, name: str) -> Registry:
    reg = ctx.state.registries.get(key(rg, name))
    if reg is None:
        raise resource_not_found(f"{NS}/registries", name, rg)
    return reg


def ready(ctx: Ctx, reg: Registry) -> bool:
    return ctx.clock.now() >= reg.ready_at


def check_name(ctx: Ctx, body: dict[str, Any]) -> dict[str, Any]:
    name = str(body.get("name") or "")
    if not NAME_RE.match(name):
        return {
            "nameAvailable": False,
            "reason": "Invalid",
            "message": "The specified resource name must be 5-50 characters of letters and digits.",
        }
    if holder(ctx, name) is not None:
        return {
            "nameAvailable": False,
            "reason": "AlreadyExists",
            "message": f"The registry {name} is already in use.",
        }
    return {"nameAvailable": True}


def put_registry(ctx: Ctx, rg: str, name: str, body: dict[str, Any]) -> tuple[Registry, bool]:
    if not NAME_RE.match(name):
        raise ArmError(
            f"The registry name '{name}' is invalid: 5-50 alphanumeric characters.",
            code="InvalidResourceName",
        )
    group = rg_models.live_rg(ctx, rg)
    held = holder(ctx, name)
    if held is not None and (held[0] is not ctx or held[1].rg.lower() != rg.lower()):
        raise ConflictError(f"The registry {name} is already in use.", code="AlreadyInUse")
    location = str(body.get("location") or "")
    if not rg_models.known_location(location):
        raise ArmError(f"The location '{location}' is invalid.", code="LocationNotAvailableForResourceType")
    sku = str((body.get("sku") or {}).get("name") or "")
    if sku not in SKUS:
        raise ArmError(f"The SKU '{sku}' is not valid: one of {', '.join(SKUS)}.", code="InvalidSku")
    if (body.get("properties") or {}).get("adminUserEnabled"):
        pass  # allowed by ACR; acagpu never asks for it (a test checks its bodies)
    tags = {str(k): str(v) for k, v in (body.get("tags") or {}).items()}
    if held is not None:
        reg = held[1]
        reg.tags, reg.sku = tags, sku
        return reg, False
    reg = Registry(
        rg=group.name,
        name=name,
        location=normalize_location(location),
        tags=tags,
        sku=sku,
        created=utc_now(),
        ready_at=ctx.clock.after_seconds(CREATE_S),
    )
    ctx.state.registries[key(rg, name)] = reg
    return reg, True


def registry_body(ctx: Ctx, reg: Registry) -> dict[str, Any]:
    return {
        "id": registry_id(ctx, reg),
        "name": reg.name,
        "type": f"{NS}/registries",
        "location": reg.location,
        "tags": dict(reg.tags),
        "sku": {"name": reg.sku, "tier": reg.sku},
        "properties": {
            "loginServer": reg.login_server,
            "creationDate": iso_z(reg.created),
            "provisioningState": "Succeeded" if ready(ctx, reg) else "Creating",
            "adminUserEnabled": False,
            "anonymousPullEnabled": False,
            "publicNetworkAccess": "Enabled",
            "zoneRedundancy": "Disabled",
        },
    }


def delete_registry(ctx: Ctx, rg: str, name: str) -> bool:
    return ctx.state.registries.pop(key(rg, name), None) is not None


def delete_in_group(ctx: Ctx, rg: str) -> None:
    for found in [k for k, r in ctx.state.registries.items() if r.rg.lower() == rg.lower()]:
        ctx.state.registries.pop(found, None)


def missing_image(ctx: Ctx, source: str) -> str | None:
    """Why the emulator's image model says `source` cannot be read, or None."""
    if ctx.faults.fire("pull", path=source) is not None:
        return f"manifest unknown: {source}"
    return sources.unknown_source(source)  # a job's pull judges it the same way (pulls.py)


def image_size_bytes(source: str) -> int:
    return int(image_size_gb(source) * 1e9)


def begin_import(ctx: Ctx, reg: Registry, body: dict[str, Any]) -> tuple[float, list[str], str | None]:
    """(when it ends, the target tags, why it fails or None); the images land when it ends."""
    if not ready(ctx, reg):
        raise ConflictError(f"The registry {reg.name} is still being created.", code="RegistryNotReady")
    source = body.get("source") or {}
    image = str(source.get("sourceImage") or "")
    if not image:
        raise ArmError("source.sourceImage is required.", code="InvalidParameters")
    uri = str(source.get("registryUri") or "docker.io")
    full = image if uri in ("docker.io", "registry-1.docker.io") else f"{uri}/{image}"
    targets = [str(t) for t in body.get("targetTags") or [image]]
    if str(body.get("mode") or "NoForce") == "NoForce":
        clash = [t for t in targets if t.lower() in reg.images]
        if clash and all(reg.images[t.lower()].source != full for t in clash):
            raise ConflictError(f"Tag {clash[0]} already exists in {reg.name}.", code="TagAlreadyExists")
    size = image_size_bytes(full)
    failure = missing_image(ctx, full)
    done = ctx.clock.after_seconds(pulls.import_seconds(size))
    if failure is None:
        digest = "sha256:" + hashlib.sha256(full.encode()).hexdigest()
        for target in targets:  # no streaming artifact until its conversion is requested (streaming.py)
            before = reg.images.get(target.lower())
            if before is not None and before.digest == digest:  # the same manifest: its referrers stay
                continue
            reg.images[target.lower()] = StagedImage(full, digest, size, done)
    return done, targets, failure
