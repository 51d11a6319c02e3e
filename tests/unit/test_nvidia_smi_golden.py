"""Golden files: every `expect` key of every fixture must match what parse() returns.

Fixtures live in tests/fixtures/nvidia_smi/: three header lines (`source:`, `expect: {json}`,
`---`) then the output verbatim. Real outputs name their public source; synthetic ones say
`source: synthetic` so they are never mistaken for captured data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.gpu import nvidia_smi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
CASES = sorted(FIXTURES.glob("*.txt"))
FREE_TEXT = {"notes", "health"}  # health: tests/unit/test_gpu_health.py


@dataclass(frozen=True)
class Case:
    source: str
    expect: dict[str, Any]
    body: str

    @property
    def fields(self) -> str | None:
        """A headerless CSV is parsed with the field list it was produced with, as `--fields` does."""
        query = self.expect.get("query")
        return query if self.expect.get("header") is False else None


def load_case(path: Path) -> Case:
    source, expect, rule, body = path.read_text(encoding="utf-8").split("\n", 3)
    assert source.startswith("source: ") and len(source) > 20, f"{path.name}: no source line"
    assert expect.startswith("expect: "), f"{path.name}: no expect line"
    assert rule == "---", f"{path.name}: third line must be ---"
    return Case(source[len("source: ") :], json.loads(expect[len("expect: ") :]), body)


def mismatches(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Every expected key (recursively) must be present and equal; lists must match in length."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where or '.'}: expected an object, got {actual!r}"]
        out: list[str] = []
        for key, want in expected.items():
            if key in FREE_TEXT:
                continue
            if key not in actual:
                out.append(f"{where}.{key}: missing")
            else:
                out.extend(mismatches(want, actual[key], f"{where}.{key}"))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {len(expected)} items, got {actual!r}"]
        return [
            m
            for i, (w, a) in enumerate(zip(expected, actual, strict=True))
            for m in mismatches(w, a, f"{where}[{i}]")
        ]
    if type(expected) is bool or type(actual) is bool:
        return [] if expected is actual else [f"{where}: expected {expected!r}, got {actual!r}"]
    return [] if expected == actual else [f"{where}: expected {expected!r}, got {actual!r}"]


def test_corpus_is_all_there() -> None:
    assert len(CASES) >= 48
    real = [c for c in CASES if not load_case(c).source.startswith("synthetic")]
    assert len(real) >= 37  # the 34 public outputs and the 3 from the seed documents


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_every_expect_key_matches(path: Path) -> None:
    case = load_case(path)
    result = nvidia_smi.parse(case.body, fields=case.fields).as_dict()
    problems = mismatches(case.expect, result)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_result_is_one_json_document_with_the_contract_keys(path: Path) -> None:
    case = load_case(path)
    doc = json.loads(json.dumps(nvidia_smi.parse(case.body, fields=case.fields).as_dict()))
    assert {"driver_version", "cuda_version", "gpus", "error", "format"} <= doc.keys()
    assert (doc["error"] is None) == bool(doc["gpus"])
    for gpu in doc["gpus"]:
        named = isinstance(gpu["name"], str) or "name" not in (doc.get("query") or "name").split(",")
        assert isinstance(gpu["index"], int) and named  # (a CSV without a name column names none)
        assert {"memory_total_mib", "memory_used_mib"} <= gpu.keys()


def test_synthetic_fixtures_say_so_on_their_first_line() -> None:
    for path in CASES:
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        if "synthetic" in path.name:
            assert first.startswith("source: synthetic"), path.name
        else:
            assert "synthetic" not in first, path.name


def test_the_comparison_itself_catches_differences() -> None:
    """Guard the guard: a wrong value, a missing key and a length mismatch are all reported."""
    assert mismatches({"a": 1}, {"a": 2}) == [".a: expected 1, got 2"]
    assert mismatches({"a": [1, 2]}, {"a": [1]}) == [".a: expected 2 items, got [1]"]
    assert mismatches({"b": None}, {}) == [".b: missing"]
    assert mismatches({"x": False}, {"x": 0}) == [".x: expected False, got 0"]
    assert mismatches({"notes": "free", "y": 1}, {"y": 1}) == []
