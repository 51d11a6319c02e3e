"""`acagpu image stage IMAGE... --env NAME`: copy images into the environment's own registry.

Order matters, and everything that can refuse does so before anything exists: each image is read
from its registry (a tag that does not exist, or a registry that refuses us, is exit 2 with the
fix), the registry name is checked (names are global: one taken in another subscription is exit 2),
and the caller's right to assign `AcrPull` is read (exit 2 with the command an administrator can
run). Then: the registry (made on request, Standard, tagged like the environment's group, no admin
user), the environment's system-assigned identity with `AcrPull` on that registry alone, and one
server-side import per image (ARM's importImage, no Docker). Each is read before it is made, so a
second run makes only what is missing. The registry sits in the environment's group and goes with
it (`env delete`, reap, the guard); a half-made one goes the same way. An import that fails on its
source (with --no-inspect nothing read it first) is exit 2: a registry made by this call for images
none of which arrived is deleted again, and images that did arrive are recorded before it says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, AuthError, BadInput, CloudError, NotFound, PreflightRefused
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow import envs
from aca_gpu.workflow.staging import catalogue
from aca_gpu.workflow.staging.catalogue import Staged
from aca_gpu.workflow.workload.shares import account_tags

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
    from aca_gpu.workflow.tags import TagsQuery, default_source

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
    created: list[str] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "registry": self.registry,
            "resource_group": self.resource_group,
            "login_server": self.login_server,
            "created": list(self.created),
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


def stage_images(
    cloud: Cloud,
    env_name: str,
    images: Sequence[str],
    progress: Progress,
    *,
    inspect: bool = True,
    sku: str = SKU,
    stream: bool = False,
) -> StageResult:
    """Stage every image (see the module doc); returns what was made and where each image is."""
    refs = [parse_image_ref(i) for i in dict.fromkeys(i.strip() for i in images if i.strip())]
    if not refs:
        raise BadInput("name at least one image to stage")
    if sku not in SKUS:
        raise BadInput(f"--sku {sku}: one of {', '.join(SKUS)}")
    if stream and sku != STREAMING_SKU:
        raise BadInput(
            f"--stream needs a {STREAMING_SKU} registry: ACR's artifact streaming is not offered on {sku}",
            hint=f"add --sku {STREAMING_SKU}",
        )
    group, env = envs.find_env(cloud, env_name)
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
        tags = account_tags(dict(group.tags))
        if reg is None or (reg.provisioning_state or "Succeeded") != "Succeeded" or reg.sku != sku:
            step.update(f"{'creating' if reg is None else 'updating'} in {group.location} ({sku})")
            reg = ops.put_registry(clients, group.name, name, group.location, sku, tags)
            if reg is not None:
                result.created.append(f"registry {name} ({sku})")
        result.login_server = reg.login_server
        step.update(f"{reg.login_server} ({reg.sku})")
    with progress.step("environment identity (AcrPull)") as step:
        principal = ops.environment_identity(clients, group.name, env.name)
        if not principal:
            raise PreflightRefused(f"environment {env.name} answered no managed identity")
        ops.assign_acr_pull(clients, reg.id, principal)
        step.update(f"{principal} may pull from {name}")
    staged = catalogue.read(reg.tags)
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
            if not stream:
                result.images.append(staged[image].as_dict(reg.login_server))
        if stream:
            for ref in refs:
                staged[str(ref)] = _convert(clients, reg.login_server, staged[str(ref)], progress)
                result.images.append(staged[str(ref)].as_dict(reg.login_server))
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


def staged_in(cloud: Cloud, resource_group: str, env_name: str) -> tuple[str, dict[str, Staged]] | None:
    """(login server, image -> Staged) of the environment's registry; None when it has none (or
    this cloud cannot say). A read error is not a run's failure: it pulls from the public registry."""
    try:
        ops, clients = registry_ops(cloud)
        reg = ops.get_registry(
            clients, resource_group, catalogue.registry_name(clients.subscription_id, env_name)
        )
    except AcaGpuError:
        return None
    if reg is None or not reg.login_server:
        return None
    return reg.login_server, catalogue.read(reg.tags)


def listing(cloud: Cloud, resource_group: str, env_name: str) -> dict[str, Any] | None:
    """What `env show` prints about staging: the registry and each image's copy, digest and size."""
    found = staged_in(cloud, resource_group, env_name)
    if found is None:
        return None
    server, staged = found
    return {
        "login_server": server,
        "images": [s.as_dict(server) for s in sorted(staged.values(), key=lambda s: s.image)],
    }
