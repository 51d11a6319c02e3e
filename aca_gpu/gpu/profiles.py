"""The ACA GPU workload-profile catalog and GPU datasheet peaks, both read from bundled JSON.

`profiles.json` lists the workload profile types acagpu can deploy to (serverless T4/A100 and the
dedicated NC*-A100 node sizes) with friendly aliases; `gpus.json` holds NVIDIA datasheet peaks keyed
by the exact names nvidia-smi and torch print, and is also read by the standalone gpu-tester script,
so its shape is a contract. Lookups never guess: an unknown name is None, an unknown alias BadInput.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.resources import data_path


@dataclass(frozen=True)
class GpuProfile:
    """One ACA workload profile type that carries GPUs."""

    type: str  # the workloadProfileType, e.g. Consumption-GPU-NC8as-T4
    aliases: tuple[str, ...]
    gpu: str  # the GPU's name as nvidia-smi prints it (a key of gpus.json)
    gpu_count: int
    vcpu: int
    memory_gib: int
    serverless: bool  # Consumption GPU: per-replica billing, no min/max counts allowed
    container_cpu: float  # what the explorer/tester container requests on this profile
    container_memory_gib: int
    regions: tuple[str, ...]  # the docs' list; informational, a live listing wins
    note: str = ""

    @property
    def container_memory(self) -> str:
        """The memory string ACA container resources take, e.g. `56Gi`."""
        return f"{self.container_memory_gib}Gi"

    @property
    def sends_counts(self) -> bool:
        """Dedicated profiles take minimum/maximum node counts; serverless GPU ones reject them."""
        return not self.serverless

    def offered_in(self, location: str) -> bool:
        return location.lower().replace(" ", "") in self.regions

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet peaks (dense, no sparsity) for one GPU model."""

    name: str
    aliases: tuple[str, ...]
    fp32_tflops: float
    tf32_tflops: float
    fp16_tflops: float
    bf16_tflops: float | None  # None where the GPU has no BF16 tensor cores (T4, V100)
    mem_bw_gbps: float
    memory_gib: float
    source: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _load(name: str) -> dict[str, Any]:
    with data_path(name).open(encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


@cache
def profile_catalog() -> tuple[GpuProfile, ...]:
    doc = _load("profiles.json")
    return tuple(
        GpuProfile(
            type=p["type"],
            aliases=tuple(p["aliases"]),
            gpu=p["gpu"],
            gpu_count=int(p["gpu_count"]),
            vcpu=int(p["vcpu"]),
            memory_gib=int(p["memory_gib"]),
            serverless=bool(p["serverless"]),
            container_cpu=float(p["container_cpu"]),
            container_memory_gib=int(p["container_memory_gib"]),
            regions=tuple(p["regions"]),
            note=p.get("note", ""),
        )
        for p in doc["profiles"]
    )


def catalog_source() -> str:
    return str(_load("profiles.json")["source"])


def valid_aliases() -> list[str]:
    return [alias for p in profile_catalog() for alias in p.aliases]


def resolve_profile(alias: str) -> GpuProfile:
    """`t4`, `A100`, `nc48-a100` or a full type name (case-insensitive) -> its profile."""
    wanted = alias.strip().lower()
    for profile in profile_catalog():
        if wanted == profile.type.lower() or wanted in (a.lower() for a in profile.aliases):
            return profile
    raise BadInput(
        f"unknown GPU profile {alias!r}; valid: {', '.join(valid_aliases())} (or a full profile type name)",
        code="UnknownGpuProfile",
        hint="`acagpu profiles --offline` lists every GPU profile with its aliases",
    )


@cache
def gpu_specs() -> dict[str, GpuSpec]:
    doc = _load("gpus.json")
    return {
        name: GpuSpec(
            name=name,
            aliases=tuple(g.get("aliases", ())),
            fp32_tflops=float(g["fp32_tflops"]),
            tf32_tflops=float(g["tf32_tflops"]),
            fp16_tflops=float(g["fp16_tflops"]),
            bf16_tflops=None if g["bf16_tflops"] is None else float(g["bf16_tflops"]),
            mem_bw_gbps=float(g["mem_bw_gbps"]),
            memory_gib=float(g["memory_gib"]),
            source=g["source"],
        )
        for name, g in doc["gpus"].items()
    }


def _normalise(name: str) -> str:
    """Case, separators and the vendor words drivers add or drop (`NVIDIA `, `Tesla `) are not identity."""
    text = re.sub(r"[\s_-]+", " ", name.strip().upper())
    words = text.split(" ")
    while words and words[0] in ("NVIDIA", "TESLA"):
        words.pop(0)
    return " ".join(words)


def same_gpu(a: str, b: str) -> bool:
    """Whether two names nvidia-smi or a profile give are one GPU model (`Tesla T4` = `T4`)."""
    left, right = lookup_gpu(a), lookup_gpu(b)
    if left is not None and right is not None:
        return left.name == right.name
    return _normalise(a) == _normalise(b)


def lookup_gpu(name: str) -> GpuSpec | None:
    """Exact name first, then aliases, then a normalised match that must be unique. Truncated names
    (`NVIDIA A100-PCI...`) and unknown models return None."""
    specs = gpu_specs()
    if name in specs:
        return specs[name]
    if "..." in name or "…" in name:
        return None
    lowered = name.strip().lower()
    for spec in specs.values():
        if lowered == spec.name.lower() or lowered in (a.lower() for a in spec.aliases):
            return spec
    key = _normalise(name)
    if not key:
        return None
    matches = {
        spec.name
        for spec in specs.values()
        for candidate in (spec.name, *spec.aliases)
        if _normalise(candidate) == key
    }
    return specs[matches.pop()] if len(matches) == 1 else None
