"""`acagpu tags`: list a repository's tags, keep the new CUDA ones, optionally read their digests.

The registry source is chosen here: ACR (`*.azurecr.io`) through the Azure adapter with an Azure
credential, any other registry through the plain OCI client. Either way the selection rules are
the same (`aca_gpu.registry.tags`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import ImageRef, parse_image_ref
from aca_gpu.output import NullProgress, Progress
from aca_gpu.registry.client import RegistryClient
from aca_gpu.registry.images import ImageInfo, RegistrySource, inspect_image
from aca_gpu.registry.tags import CudaTag, TagFilter, parse_version, select, tags_in_text


@dataclass(frozen=True)
class TagsQuery:
    repository: str  # `nvidia/cuda`, or with a registry: `nvcr.io/nvidia/cuda`
    registry: str | None = None  # overrides the host in `repository`
    flavor: str | None = None
    os: str | None = None
    since: str | None = None
    not_in: Path | None = None
    limit: int | None = None
    inspect: bool = False  # also fetch each tag's digest and CUDA env (one manifest + config each)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    verify: bool | str = True  # CA bundle path for a private registry with its own CA


@dataclass(frozen=True)
class TagsResult:
    registry: str
    repository: str
    listed: int  # tags the registry has
    excluded: int  # tags dropped because --not-in listed them
    tags: tuple[CudaTag, ...]
    images: dict[str, ImageInfo] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [t.tag for t in self.tags]

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for tag in self.tags:
            row = tag.as_dict()
            row["image"] = self.image_of(tag.tag)
            info = self.images.get(tag.tag)
            if info is not None:
                row.update(digest=info.digest, require_cuda=info.require_cuda, env_cuda=info.cuda_version)
            rows.append(row)
        return {
            "schema": 1,
            "kind": "tags",
            "registry": self.registry,
            "repository": self.repository,
            "listed": self.listed,
            "excluded": self.excluded,
            "tags": rows,
        }

    def image_of(self, tag: str) -> str:
        prefix = "" if self.registry == "docker.io" else f"{self.registry}/"
        return f"{prefix}{self.repository}:{tag}"


SourceFactory = Callable[[ImageRef, TagsQuery], RegistrySource]


def resolve_repository(query: TagsQuery) -> ImageRef:
    text = query.repository
    if ":" in text.rsplit("/", 1)[-1] or "@" in text:
        raise BadInput(f"give a repository without a tag or digest, not {text!r}")
    if query.registry:
        registry = query.registry.split("://")[-1].rstrip("/")
        text = f"{registry}/{text}"
    ref = parse_image_ref(text)
    return ref


def default_source(ref: ImageRef, query: TagsQuery) -> RegistrySource:
    """ACR through the Azure SDK (Entra auth); every other registry through the OCI client."""
    if ref.registry.endswith(".azurecr.io"):
        from aca_gpu.azure.acr import AcrSource

        return AcrSource.for_registry(ref.registry)
    host = ref.registry_host
    if query.registry and query.registry.startswith("http://"):
        host = f"http://{host}"  # only ever asked for explicitly (a local registry)
    return RegistryClient(host, username=query.username, password=query.password, verify=query.verify)


def discover(
    query: TagsQuery,
    *,
    source_factory: SourceFactory = default_source,
    progress: Progress | None = None,
) -> TagsResult:
    progress = progress or NullProgress()
    rules = _rules(query)
    ref = resolve_repository(query)
    source = source_factory(ref, query)
    with progress.step(f"list tags of {ref.repository}") as step:
        listed = source.list_tags(ref.repository)
        step.update(f"{len(listed)} tags")
    chosen = select(listed, rules, ref.repository)
    matching = select(listed, TagFilter(rules.flavor, rules.os, rules.since), ref.repository)
    excluded = sum(1 for tag in matching if tag.tag in rules.exclude)
    images: dict[str, ImageInfo] = {}
    if query.inspect and chosen:
        with progress.step(f"inspect {len(chosen)} images") as step:
            for tag in chosen:
                images[tag.tag] = inspect_image(source, ref.repository, tag.tag)
            step.update(f"{len(images)} digests")
    return TagsResult(ref.registry, ref.repository, len(listed), excluded, tuple(chosen), images)


def _rules(query: TagsQuery) -> TagFilter:
    if query.limit is not None and query.limit < 1:
        raise BadInput(f"--limit must be at least 1, not {query.limit}")
    exclude: frozenset[str] = frozenset()
    if query.not_in is not None:
        try:
            text = query.not_in.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInput(f"cannot read --not-in file {query.not_in}: {exc.strerror or exc}") from exc
        exclude = tags_in_text(text, str(query.not_in))
    since = parse_version(query.since) if query.since else None
    return TagFilter(query.flavor, query.os, since, exclude, query.limit)


def render_text(result: TagsResult) -> str:
    """A table for people: the newest first, digests and driver requirements when inspected."""
    head = f"{result.registry}/{result.repository}: {len(result.tags)} of {result.listed} tags match"
    if result.excluded:
        head += f" ({result.excluded} already listed in --not-in)"
    if not result.tags:
        return head
    rows = [("TAG", "CUDA", "FLAVOR", "OS", *(("DIGEST", "REQUIRES") if result.images else ()))]
    for tag in result.tags:
        row: tuple[str, ...] = (tag.tag, tag.version_text, tag.flavor, tag.os or "-")
        info = result.images.get(tag.tag)
        if info is not None:
            row += (info.digest[:19], info.require_cuda or "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([head, *lines])
