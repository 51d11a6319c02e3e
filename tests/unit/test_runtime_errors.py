"""Golden files of real GPU container failures: each must be recognised as the kind it names.

Fixtures live in tests/fixtures/runtime_errors/: `source:` (where the output came from), `expect:`
(the kinds in order, and details of the first), `---`, then the output verbatim.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aca_gpu.gpu import runtime_errors
from aca_gpu.gpu.runtime_errors import recognise

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runtime_errors"
CASES = sorted(FIXTURES.glob("*.txt"))


def _load(path: Path) -> tuple[str, dict[str, object], str]:
    source, expect, rule, body = path.read_text(encoding="utf-8").split("\n", 3)
    assert source.startswith("source: ") and len(source) > 20, f"{path.name}: no source line"
    assert rule == "---", f"{path.name}: third line must be ---"
    return source, json.loads(expect.removeprefix("expect: ")), body


def test_there_are_fixtures_for_every_issue_text() -> None:
    kinds = {k for path in CASES for k in _load(path)[1]["kinds"]}  # type: ignore[attr-defined]
    assert {
        runtime_errors.DOCKER_NO_GPU_DRIVER,
        runtime_errors.NVML_MISMATCH,
        runtime_errors.LIBCUDA_MISSING,
        runtime_errors.CUDA_REQUIREMENT,
        runtime_errors.NO_CUDA_DEVICE,
    } <= kinds


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    _, expect, body = _load(path)
    found = recognise(body)
    assert [f.kind for f in found] == expect["kinds"]
    if found:
        first = found[0]
        assert first.summary and first.fix and first.evidence
        assert first.evidence in " ".join(body.split()) or first.evidence.rstrip("…")[:40] in body
        for key, value in dict(expect.get("details", {})).items():  # type: ignore[call-overload]
            assert first.details.get(key) == value, key
        if "gpu" in expect:
            assert first.gpu is expect["gpu"]


def test_cuda_requirement_names_the_minimum_driver() -> None:
    (finding,) = recognise("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4")
    assert finding.details == {"cuda": "12.4", "min_driver": "550.54.14"}
    assert "550.54.14" in finding.fix


def test_each_kind_once_in_order_and_nothing_from_noise() -> None:
    text = (
        "WARNING: Could not find any nv files on this host!\n"
        '\x1b[31mFATAL:\x1b[0m   "nvidia-smi": executable file not found in $PATH\n'
        "WARNING: Could not find any nv files on this host!\n"
    )
    assert [f.kind for f in recognise(text)] == [
        runtime_errors.APPTAINER_NO_NV_FILES,
        runtime_errors.NVIDIA_SMI_NOT_IN_CONTAINER,
    ]
    assert recognise("") == []
    assert recognise("all good\nGPU 0: NVIDIA H100 (UUID: GPU-1)\n" * 1000) == []


def test_evidence_is_bounded() -> None:
    (finding,) = recognise("no CUDA-capable device is detected " + "x" * 5000)
    assert len(finding.evidence) <= 300
