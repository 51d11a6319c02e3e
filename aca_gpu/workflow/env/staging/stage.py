"""`acagpu image stage IMAGE... --env NAME`: copy images into the environment's own registry.

Order matters, and everything that can refuse does so before anything exists: each image is read
from its registry (a tag that does not exist, or a registry that refuses us, is exit 2 with the
fix), the registry name is checked (names are global: one taken in another subscription is exit 2),
and the caller's right to assign `AcrPull` is read (exit 2 with the command an administrator can
run). Then the question (the CLI's one `--yes` rule: a registry bills a fixed fee per day for its
tier, and the question names it, the tier and any change of tier), and: the registry (made on
request, Standard unless `--sku` says otherwise; an existing one keeps its tier and its tags, the
catalogue among them), the environment's system-assigned identity with `AcrPull` on that registry
alone, and one server-side import per image (ARM's importImage, no Docker). Each is read before it
is made, so a second run makes only what is missing. The registry sits in the environment's group
and goes with it (`env delete`, reap, the guard); a half-made one goes the same way. An import that
fails on its source (with --no-inspect nothing read it first) is exit 2: a registry made by this
call for images none of which arrived is deleted again, and images that did arrive are recorded
before it says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aca_gpu import cost, naming
from aca_gpu.errors import AcaGpuError, AuthError, BadInput, CloudError, NotFound, PreflightRefused
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.env.find import find_env
from aca_gpu.workflow.env.shares import account_tags
from aca_gpu.workflow.env.staging import catalogue
from aca_gpu.workflow.env.staging.catalogue import Staged

SKU = "Standard"
SKUS = ("Standard", "Premium")  # Premium is what ACR's artifact streaming needs (docs/staging.md)
STREAMING_SKU = "Premium"
CONVERSION_DEADLINE_S = 1800.0  # ACR converts a GB image in minutes (docs/staging.md); past this, exit 4


@dataclass
class SourceFacts:
    """What the image's own registry says: its digest and its compressed size (layers + config)."""

    digest: str | None = None
    size_bytes: int | None = None
    unread: str = ""  # why it could not be read (not a refusal: the import will say)


def read_source(ref: ImageRef) -> SourceFacts:
    """Digest and size from the registry's manifests; a missing image or a refusal is exit 2."""
    from aca_gpu.registry.images import pick_platform
    from aca_gpu.workflow.preflight.tags import TagsQuery, default_source

    source = default_source(ref, TagsQuery(repository=ref.repository))
    try:
        top = source.get_manifest(ref.repository, ref.reference)
        image = source.get_manifest(ref.repository, pick_platform(top)) if top.is_index else top
    except NotFound:
        raise BadInput(
            f"image {ref} does not exist: its registry has no {ref.reference} in {ref.repository}",
            hint=f"check the name and tag (`acagpu tags {ref.registry}/{ref.repository}` lists the tags)",
        ) from None
    except AuthError as exc:
        raise BadInput(
            f"image {ref} cannot be read: {exc.message}",
            hint="a private image needs credentials the import can use: stage public images, or push it",
        ) from None
    except AcaGpuError as exc:
        return SourceFacts(unread=exc.message)
    layers = [d for d in image.body.get("layers") or [] if isinstance(d, dict)]
    config = image.body.get("config") or {}
    size = sum(int(d.get("size") or 0) for d in layers) + int(config.get("size") or 0)
    return SourceFacts(top.digest, size or None)


@dataclass
class StageResult:
    env: str
    registry: str
    resource_group: str
    login_server: str = ""
    sku: str = ""
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)  # what this call imported (images: all staged)
    images: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "registry": self.registry,
            "resource_group": self.resource_group,
            "login_server": self.login_server,
            "sku": self.sku,
            "created": list(self.created),
            "changed": list(self.changed),
            "imported": list(self.imported),
            "images": list(self.images),
            "notes": list(self.notes),
        }


def registry_ops(cloud: Cloud) -> Any:
    """The Azure layer's registry calls on this cloud's clients (AzureCloud only)."""
    from aca_gpu.azure import acr_registry

    clients = getattr(cloud, "clients", None)
    if clients is None:
        raise PreflightRefused("staging needs Azure (or the emulator): this cloud has no ARM clients")
    return acr_registry, clients


def _refuse_assignment(ops: Any, clients: Any, registry: str, rg: str) -> None:
    allowed = ops.may_assign_roles(clients, rg)
    if allowed is False:
        scope = f"/subscriptions/{clients.subscription_id}/resourceGroups/{rg}"
        raise PreflightRefused(
            f"you may not assign roles in subscription {clients.subscription_id}, and the environment's "
            f"identity needs AcrPull on registry {registry}",
            code="AuthorizationFailed",
            hint=(
                "ask for 'Role Based Access Control Administrator' (or Owner) on "
                f"{scope}, or have an administrator stage the images once"
            ),
        )


def stage_arguments(images: Sequence[str], sku: str | None, stream: bool) -> list[ImageRef]:
    """The images to stage, parsed; BadInput for a bad image, tier or `--stream` pairing. The CLI
    asks this before its `--yes` rule, so bad input is said as bad input whatever else is missing."""
    refs = [parse_image_ref(i) for i in dict.fromkeys(i.strip() for i in images if i.strip())]
    if not refs:
        raise BadInput("name at least one image to stage")
    if sku is not None and sku not in SKUS:
        raise BadInput(f"--sku {sku}: one of {', '.join(SKUS)}")
    if stream and sku not in (None, STREAMING_SKU):
        raise BadInput(
            f"--stream needs a {STREAMING_SKU} registry: ACR's artifact streaming is not offered on {sku}",
            hint=f"add --sku {STREAMING_SKU}",
        )
    return refs


def stage_images(
    cloud: Cloud,
    env_name: str,
    images: Sequence[str],
    progress: Progress,
    *,
    inspect: bool = True,
    sku: str | None = None,
    stream: bool = False,
    approve: Callable[[str], None],
) -> StageResult:
    """Stage every image (see the module doc); returns what was made and where each image is.

    `sku` None keeps an existing registry's tier (Standard for a new one); another tier than the
    registry's is a change that `approve` is asked about, as is a new registry: `approve(question)`
    returns when it may go ahead and raises when not (the CLI's one `--yes` rule), before anything
    is made or changed."""
    refs = stage_arguments(images, sku, stream)
    group, env = find_env(cloud, env_name)
    ops, clients = registry_ops(cloud)
    name = catalogue.registry_name(clients.subscription_id, env_name)
    result = StageResult(env_name, name, group.name)
    facts: dict[str, SourceFacts] = {}
    with progress.step("read images from their registries") as step:
        for ref in refs:
            step.update(str(ref))
            facts[str(ref)] = read_source(ref) if inspect else SourceFacts(unread="not read (--no-inspect)")
        unread = [f"{i}: {f.unread}" for i, f in facts.items() if f.unread]
        result.notes += [f"could not read {u}; the import will say if it cannot" for u in unread if inspect]
        step.update(f"{len(refs) - len(unread)} of {len(refs)} read")
    with progress.step(f"registry {name}") as step:
        reg = ops.get_registry(clients, group.name, name)
        if reg is None:
            free, why = ops.name_available(clients, name)
            if not free:
                raise PreflightRefused(
                    f"registry name {name} is taken elsewhere ({why}); registry names are global",
                    code="RegistryNameTaken",
                    hint=f"delete that registry, or use another environment name than {env_name}",
                )
        _refuse_assignment(ops, clients, name, group.name)
        tier = sku or (reg.sku if reg is not None and reg.sku in SKUS else SKU)
        if stream and tier != STREAMING_SKU:
            why = f"registry {name} is {tier}" if reg else f"artifact streaming is not offered on {tier}"
            raise BadInput(
                f"--stream needs a {STREAMING_SKU} registry: {why}",
                hint=f"add --sku {STREAMING_SKU}" + (" (a change of tier, asked first)" if reg else ""),
            )
        change = _tier_change(reg, tier)
        step.update("none yet" if reg is None else f"{reg.login_server} ({reg.sku})")
    approve(_question(name, group.name, reg, tier, len(refs)))  # no step is open while it asks
    if reg is None or (reg.provisioning_state or "Succeeded") != "Succeeded" or reg.sku != tier:
        made = reg is None
        with progress.step(f"{'create' if made else 'update'} registry {name}") as step:
            step.update(f"in {group.location} ({tier})")
            # an update keeps the registry's own tags: its catalogue of what is staged is among them
            tags = {**(dict(reg.tags) if reg is not None else {}), **account_tags(dict(group.tags))}
            reg = ops.put_registry(clients, group.name, name, group.location, tier, tags)
            if made:
                result.created.append(f"registry {name} ({tier})")
            elif change:
                result.changed.append(f"registry {name} ({change})")
            step.update(f"{reg.login_server} ({reg.sku})")
    result.login_server = reg.login_server
    result.sku = reg.sku
    with progress.step("environment identity (AcrPull)") as step:
        principal = ops.environment_identity(clients, group.name, env.name)
        if not principal:
            raise PreflightRefused(f"environment {env.name} answered no managed identity")
        ops.assign_acr_pull(clients, reg.id, principal)
        step.update(f"{principal} may pull from {name}")
    staged = catalogue.read(reg.tags)
    if reg.sku != STREAMING_SKU:  # artifact streaming is a Premium feature: none is served below it
        staged = {k: replace(v, streaming=False) for k, v in staged.items()}
    had_images = bool(staged)
    imported: list[str] = []  # what arrived in this call (a failed conversion leaves them staged)
    try:
        for ref in refs:
            image = str(ref)
            with progress.step(f"import {image}") as step:
                source_registry, source_image, target = catalogue.target_of(image)
                size = facts[image].size_bytes
                step.update(  # the wait says what it waits for: ARM's copy, minutes for GB images
                    "the registry copies it server-side"
                    + (f" ({size / 1e9:.2f} GB)" if size else "")
                    + f", followed until it ends (at most {ops.IMPORT_DEADLINE_S / 60:.0f} min)"
                )
                ops.import_image(clients, group.name, name, source_registry, source_image, target)
                fact, before = facts[image], staged.get(image)
                kept = before is not None and before.target == target and before.digest == fact.digest
                staged[image] = Staged(
                    image,
                    target,
                    fact.digest,
                    fact.size_bytes,
                    kept and before is not None and before.streaming,
                )
                step.update(staged[image].ref(reg.login_server))
            imported.append(image)
        if stream:
            for ref in refs:
                staged[str(ref)] = _convert(clients, reg.login_server, staged[str(ref)], progress)
        result.imported = list(imported)
        # staging adds to what is staged: the document lists everything the registry now holds
        result.images = [s.as_dict(reg.login_server) for s in sorted(staged.values(), key=lambda s: s.image)]
    except AcaGpuError:
        # nothing half-made: a registry this call made for images none of which arrived goes again;
        # otherwise the images that did arrive are recorded before the failure is reported
        if result.created and not had_images and not imported:
            with progress.step(f"remove registry {name} (nothing was imported)") as step:
                try:
                    ops.delete_registry(clients, group.name, name)
                except AcaGpuError as gone:  # it goes with the environment's group in any case
                    step.update(f"left in {group.name}: {gone.message}")
        elif imported:
            _record(ops, clients, group, name, reg, staged, progress)
        raise
    _record(ops, clients, group, name, reg, staged, progress)
    return result


def _tier_change(reg: Any, tier: str) -> str:
    """`Standard -> Premium` when the registry exists in another tier than the one staging needs."""
    if reg is None or not reg.sku or reg.sku == tier:
        return ""
    ends = "; artifact streaming ends" if reg.sku == STREAMING_SKU else ""
    return f"{reg.sku} -> {tier}, as --sku asked{ends}"


def _question(name: str, rg: str, reg: Any, tier: str, count: int) -> str:
    """What `image stage` asks before it makes or changes anything billable (the one --yes rule)."""
    daily = cost.registry_daily(tier)
    fee = f"${daily.usd_per_day:.2f}/day while it exists, used or not"
    images = f"import {count} image(s)"
    if reg is None:
        return f"Create container registry {name} ({tier}, {fee}) in {rg} and {images}?"
    if reg.sku and reg.sku != tier:
        before = cost.registry_daily(reg.sku)
        ends = " Artifact streaming ends with Premium." if reg.sku == STREAMING_SKU else ""
        return (
            f"Change container registry {name} from {reg.sku} (${before.usd_per_day:.2f}/day) to {tier} "
            f"({fee}) and {images}?{ends}"
        )
    return f"Into container registry {name} ({tier}, {fee}): {images}?"


def _convert(clients: Any, login_server: str, item: Staged, progress: Progress) -> Staged:
    """Streaming on for the image's repository, its conversion requested by tag and waited for until
    the streaming artifact exists (docs/staging.md, "Artifact streaming")."""
    from aca_gpu.azure import acr_streaming as streaming

    repository, _, tag = item.target.rpartition(":")
    client = streaming.registry_client(clients, login_server)
    with progress.step(f"streaming artifact {item.target}") as step:
        streaming.enable_repository(client, repository)
        digest = streaming.tag_digest(client, repository, tag)
        if streaming.artifact_exists(client, repository, digest):
            step.update("converted already")
        else:
            first = streaming.request_conversion(client, repository, digest)
            streaming.wait_conversion(
                client,
                repository,
                first,
                CONVERSION_DEADLINE_S,
                lambda c: step.update(f"{c.status or 'requested'} {c.progress}".strip()),
                poll_s=float(clients.settings.polling_interval),
            )
            if not streaming.artifact_exists(client, repository, digest):
                raise CloudError(
                    f"the conversion of {item.target} succeeded but no streaming artifact refers to it"
                )
            step.update(f"converted ({digest[:19]})")
    return replace(item, streaming=True)


def _record(
    ops: Any, clients: Any, group: Any, name: str, reg: Any, staged: dict[str, Staged], progress: Progress
) -> None:
    """Write what the registry holds into its tags (the catalogue `run` and `env show` read)."""
    with progress.step("record what is staged") as step:
        tags = {k: v for k, v in reg.tags.items() if not k.startswith(catalogue.TAG_PREFIX)}
        tags.update({s.tag_key(): s.tag_value() for s in staged.values()})
        tags[naming.TAG_MANAGED] = "true"
        ops.put_registry(clients, group.name, name, reg.location or group.location, reg.sku or SKU, tags)
        step.update(f"{len(staged)} image(s) in {name}")


def registry_in(cloud: Cloud, resource_group: str, env_name: str) -> Any | None:
    """The environment's registry (acr_registry.RegistryInfo), None when it has none (or this cloud
    cannot say). A read error is not a run's failure: it pulls from the public registry."""
    try:
        ops, clients = registry_ops(cloud)
        reg = ops.get_registry(
            clients, resource_group, catalogue.registry_name(clients.subscription_id, env_name)
        )
    except AcaGpuError:
        return None
    return reg if reg is not None and reg.login_server else None


def staged_in(cloud: Cloud, resource_group: str, env_name: str) -> tuple[str, dict[str, Staged]] | None:
    """(login server, image -> Staged) of the environment's registry; None when it has none."""
    reg = registry_in(cloud, resource_group, env_name)
    return None if reg is None else (reg.login_server, catalogue.read(reg.tags))


def listing(cloud: Cloud, resource_group: str, env_name: str) -> dict[str, Any] | None:
    """What `env show` prints about staging: the registry, its tier and each image's copy, digest
    and size (the tier is what the registry costs per day, idle or not)."""
    reg = registry_in(cloud, resource_group, env_name)
    if reg is None:
        return None
    staged = catalogue.read(reg.tags)
    return {
        "registry": reg.name,
        "sku": reg.sku,
        "login_server": reg.login_server,
        "images": [s.as_dict(reg.login_server) for s in sorted(staged.values(), key=lambda s: s.image)],
    }
