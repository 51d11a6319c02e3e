"""`NVIDIA_REQUIRE_CUDA` strings, parsed and evaluated the way the NVIDIA container runtime does.

Grammar (libnvidia-container `src/cli/dsl.c`): space-separated terms are
ORed, comma-separated conditions inside a term are ANDed, several requirement variables are ANDed.
A condition is `<property><op><value>` with ops `= != < <= > >=`; property names are case-insensitive.
`cuda` is the driver's CUDA version (what nvidia-smi prints), `driver` the kernel driver version, both
compared numerically per dot component; `brand` is compared case-insensitively with `=`/`!=` only;
`arch` is the compute capability. A fact that cannot be determined makes its condition true, as the
runtime does for an unknown CUDA version or when no GPU is visible.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aca_gpu.errors import BadInput

PROPERTIES = ("cuda", "driver", "brand", "arch")
_OPS: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_CONDITION = re.compile(r"([A-Za-z]+)\s*(>=|<=|!=|=|<|>)\s*(\S+)")
_VERSION = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(text: str) -> tuple[int, ...]:
    """`535.104.05` -> (535, 104, 5); trailing zeros dropped so `535` == `535.0`."""
    if not _VERSION.fullmatch(text):
        raise BadInput(f"invalid version {text!r}")
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class Condition:
    prop: str  # lower-cased property name
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.prop}{self.op}{self.value}"

    def holds(self, facts: HostFacts) -> bool:
        if self.prop == "brand":
            if facts.brand is None:
                return True
            same = facts.brand.lower() == self.value.lower()
            return same if self.op == "=" else not same
        actual = {"cuda": facts.cuda, "driver": facts.driver, "arch": facts.arch}[self.prop]
        if actual is None:
            return True
        return _OPS[self.op](version_tuple(actual), version_tuple(self.value))


@dataclass(frozen=True)
class Term:
    """Conditions that must all hold (one space-separated alternative)."""

    conditions: tuple[Condition, ...]

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.conditions)

    def holds(self, facts: HostFacts) -> bool:
        return all(c.holds(facts) for c in self.conditions)


@dataclass(frozen=True)
class HostFacts:
    """What the runtime knows about the host; None means "could not be determined"."""

    cuda: str | None = None
    driver: str | None = None
    brand: str | None = None
    arch: str | None = None


@dataclass(frozen=True)
class Requirement:
    """One `NVIDIA_REQUIRE_*` value: alternatives, any of which lets the container start."""

    text: str
    terms: tuple[Term, ...]

    @property
    def cuda_minimum(self) -> str | None:
        """The `cuda>=X.Y` lower bound of the plain (brand-free) term, as NVIDIA's images write it."""
        for term in self.terms:
            for cond in term.conditions:
                if cond.prop == "cuda" and cond.op in (">=", ">"):
                    return cond.value
        return None

    @property
    def brand_driver_ranges(self) -> tuple[tuple[str, str | None, str | None], ...]:
        """(brand, lowest driver, driver upper bound) for each `brand=...,driver>=N,driver<M` term."""
        out: list[tuple[str, str | None, str | None]] = []
        for term in self.terms:
            brands = [c.value.lower() for c in term.conditions if c.prop == "brand" and c.op == "="]
            if not brands:
                continue
            low = next((c.value for c in term.conditions if c.prop == "driver" and c.op in (">=", ">")), None)
            high = next(
                (c.value for c in term.conditions if c.prop == "driver" and c.op in ("<", "<=")), None
            )
            out.extend((brand, low, high) for brand in brands)
        return tuple(out)

    def passing_term(self, facts: HostFacts) -> Term | None:
        return next((t for t in self.terms if t.holds(facts)), None)

    def failure_message(self) -> str:
        """The runtime's error text: only the first token is named, the hint only for `cuda>=`."""
        first = self.text.split()[0] if self.text.split() else ""
        message = f"unsatisfied condition: {first}"
        if first.lower().startswith("cuda>="):
            message += ", please update your driver to a newer version, or use an earlier cuda container"
        return f"nvidia-container-cli: requirement error: {message}"


def parse_require(text: str) -> Requirement:
    """Parse one requirement string; an unknown property or malformed condition raises BadInput."""
    terms = []
    for token in text.split():
        conditions = []
        for part in token.split(","):
            if not part:
                continue
            m = _CONDITION.fullmatch(part)
            if not m:
                raise BadInput(f"invalid NVIDIA_REQUIRE_CUDA condition {part!r}")
            prop, op, value = m.group(1).lower(), m.group(2), m.group(3)
            if prop not in PROPERTIES:
                raise BadInput(
                    f"unknown NVIDIA_REQUIRE_CUDA property {m.group(1)!r} (known: {', '.join(PROPERTIES)})"
                )
            if prop == "brand":
                if op not in ("=", "!="):
                    raise BadInput(f"brand supports only = and != (got {part!r})")
            else:
                version_tuple(value)  # validates
            conditions.append(Condition(prop, op, value))
        if conditions:
            terms.append(Term(tuple(conditions)))
    if not terms:
        raise BadInput("empty NVIDIA_REQUIRE_CUDA requirement")
    return Requirement(text.strip(), tuple(terms))


def evaluate(requirements: Sequence[Requirement], facts: HostFacts) -> tuple[bool, Requirement | None]:
    """All requirements must pass; returns (passed, the first failing requirement)."""
    for req in requirements:
        if req.passing_term(facts) is None:
            return False, req
    return True, None
