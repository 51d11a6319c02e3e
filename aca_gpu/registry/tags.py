"""Which CUDA tags are new: parse, filter (flavor, OS, minimum version, already seen) and order.

The CUDA facts of a tag (`12.4.1-cudnn-runtime-ubuntu22.04` → 12.4.1, cudnn-runtime, ubuntu22.04)
come from `aca_gpu.gpu.image_ref`; this module adds numeric version ordering and the selection
rules `acagpu tags` applies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.gpu.image_ref import parse_image_ref

_VERSION = re.compile(r"^\d+(?:\.\d+){0,2}$")


@dataclass(frozen=True)
class CudaTag:
    tag: str
    version: tuple[int, ...]
    flavor: str  # base | runtime | devel | cudnn-runtime | cudnn8-devel | ...
    os: str | None  # ubuntu22.04, ubi8, rockylinux9, ...

    @property
    def version_text(self) -> str:
        return ".".join(str(n) for n in self.version)

    def sort_key(self) -> tuple[tuple[int, ...], str, str, str]:
        """Newest version first when sorted in reverse; ties broken by name so order is stable."""
        return (self.version, self.os or "", self.flavor, self.tag)

    def as_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "cuda_version": self.version_text, "flavor": self.flavor, "os": self.os}


@dataclass(frozen=True)
class TagFilter:
    flavor: str | None = None
    os: str | None = None
    since: tuple[int, ...] | None = None
    exclude: frozenset[str] = frozenset()
    limit: int | None = None

    def accepts(self, tag: CudaTag) -> bool:
        if self.flavor is not None and tag.flavor != self.flavor:
            return False
        if self.os is not None and tag.os != self.os:
            return False
        if self.since is not None and tag.version < self.since:
            return False
        return tag.tag not in self.exclude


def parse_version(text: str) -> tuple[int, ...]:
    """`12.1` → (12, 1); compares so that 12.1 ≤ 12.1.0 ≤ 12.1.1 < 12.10."""
    text = text.strip().removeprefix("v")
    if not _VERSION.match(text):
        raise BadInput(f"invalid CUDA version {text!r}: expected MAJOR[.MINOR[.PATCH]], e.g. 12.1")
    return tuple(int(part) for part in text.split("."))


def parse_cuda_tag(tag: str, repository: str = "nvidia/cuda") -> CudaTag | None:
    """The CUDA facts of one tag, or None when the tag does not follow the nvidia/cuda scheme."""
    try:
        ref = parse_image_ref(f"{repository}:{tag}")
    except BadInput:
        return None
    if not ref.cuda_version or not ref.flavor:
        return None
    return CudaTag(tag, parse_version(ref.cuda_version), ref.flavor, ref.os)


def select(tags: Iterable[str], rules: TagFilter, repository: str = "nvidia/cuda") -> list[CudaTag]:
    """The tags that pass `rules`, newest first, at most `rules.limit`."""
    parsed = (parse_cuda_tag(t, repository) for t in tags)
    chosen = sorted((t for t in parsed if t is not None and rules.accepts(t)), key=CudaTag.sort_key)
    chosen.reverse()
    return chosen[: rules.limit] if rules.limit is not None else chosen


def tags_in_text(text: str, source: str = "<input>") -> frozenset[str]:
    """Tags already seen: one per line (bare tag or image reference, `#` comments), or JSON.

    JSON may be a list of tags, a `{"include": [...]}` matrix, or any report: every `tag` value and
    the tag of every `image` value counts, wherever it sits in the document.
    """
    stripped = text.strip()
    if not stripped:
        return frozenset()
    if stripped[0] in "[{":
        try:
            doc = json.loads(stripped)
        except ValueError as exc:
            raise BadInput(f"{source}: looks like JSON but does not parse: {exc}") from exc
        return frozenset(_tags_in_json(doc))
    found = set()
    for line in stripped.splitlines():
        item = line.split("#", 1)[0].strip()
        if item:
            found.add(_tag_of(item))
    return frozenset(found)


def _tags_in_json(doc: Any) -> Iterable[str]:
    if isinstance(doc, str):
        yield _tag_of(doc)
    elif isinstance(doc, list):
        for item in doc:
            yield from _tags_in_json(item)
    elif isinstance(doc, Mapping):
        for key, value in doc.items():
            if key in ("tag", "image") and isinstance(value, str):
                yield _tag_of(value)
            elif key == "gpus":
                continue  # a matrix document (compat/matrix.json) lists GPU aliases there, not tags
            elif isinstance(value, list | Mapping):
                yield from _tags_in_json(value)


def _tag_of(item: str) -> str:
    """`nvidia/cuda:12.4.1-runtime-ubuntu22.04` → its tag; a bare tag stays as it is."""
    item = item.split("@", 1)[0]
    _, colon, tag = item.rpartition(":")
    if colon and "/" not in tag:
        return tag
    return item
