"""`--burn`: the result check on CPU tensors (tiny sizes), and a burn result read by acagpu.

What fails a burn is an error: a product wrong beyond rounding. A product that differs only bitwise
from the first one is counted (`mismatches`) and passes: another kernel or reduction order changes
the last bit of an element legitimately.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.gpu.tester_result import parse_tester_output
from tests.unit.test_tester_script import _tester

T = _tester()
N = 64
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tester"


@pytest.fixture
def product() -> tuple[Any, Any, Any, Any]:
    """x, y, their bf16 product (the burn's first product) and the generator, on the CPU."""
    gen = torch.Generator().manual_seed(7)
    x = T.operands(torch, N, torch.bfloat16, gen, True)
    y = T.operands(torch, N, torch.bfloat16, gen, True)
    return x, y, torch.mm(x, y), gen


def test_a_recomputed_identical_product_passes(product: tuple[Any, ...]) -> None:
    x, y, first, gen = product
    got = T.burn_check(torch, x, y, first, torch.mm(x, y), "bf16", gen)
    assert got == {"error": False, "mismatch": False, "rel_err": got["rel_err"], "deviation": None}
    assert got["rel_err"] is not None and got["rel_err"] < T.ERROR_BOUNDS["bf16"]


def test_a_last_bit_difference_is_a_mismatch_not_an_error(product: tuple[Any, ...]) -> None:
    x, y, first, gen = product
    got = first.clone()
    got.view(torch.int16)[3, 5] += 1  # one unit in the last place of one element
    verdict = T.burn_check(torch, x, y, first, got, "bf16", gen)
    assert verdict["mismatch"] and not verdict["error"]
    assert 0 < verdict["deviation"] < T.ERROR_BOUNDS["bf16"]


def test_another_summation_order_passes(product: tuple[Any, ...]) -> None:
    """Split-K: two halves summed in float32, then rounded (what another cuBLAS kernel may do)."""
    x, y, first, gen = product
    half = N // 2
    split = (x[:, :half].float() @ y[:half].float() + x[:, half:].float() @ y[half:].float()).to(
        torch.bfloat16
    )
    assert not T.burn_check(torch, x, y, first, split, "bf16", gen)["error"]


def test_one_element_wrong_beyond_rounding_is_an_error_the_sample_alone_would_pass(
    product: tuple[Any, ...],
) -> None:
    x, y, first, gen = product
    got = first.clone()
    big = int(first.abs().argmax())
    got.view(-1)[big] *= 1.25  # one element 25 % off: a corrupted exponent or mantissa bits
    sample = T.sample_error(torch, x, y, got, "bf16", torch.Generator().manual_seed(7))
    assert sample["ok"], "the sampled float64 reference does not see one element in 4096"
    verdict = T.burn_check(torch, x, y, first, got, "bf16", gen)
    assert verdict["error"] and verdict["mismatch"] and verdict["deviation"] > T.ERROR_BOUNDS["bf16"]


def test_a_non_finite_element_is_an_error(product: tuple[Any, ...]) -> None:
    x, y, first, gen = product
    got = first.clone()
    got[0, 0] = float("nan")
    verdict = T.burn_check(torch, x, y, first, got, "bf16", gen)
    assert verdict["error"] and verdict["mismatch"]


# -- a burn result, as acagpu reads it -----------------------------------------------------------


def _fixture_doc() -> dict[str, Any]:
    text = (FIXTURES / "h100-default.txt").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("ACAGPU_RESULT "))
    doc: dict[str, Any] = json.loads(line.split(" ", 1)[1])
    return doc


def burn_doc(errors: int, mismatches: int = 0, failures: tuple[str, ...] = ()) -> dict[str, Any]:
    """A real H100 result with the `burn` section tester 1.2 adds, and the verdict it gives itself."""
    doc = copy.deepcopy(_fixture_doc())
    device = {
        "index": 0,
        "dtype": "bf16",
        "size": 8192,
        "seconds": 60.0,
        "tflops": 690.1,
        "checks": 30,
        "errors": errors,
        "mismatches": mismatches,
        "worst_rel_err": 0.0021,
        "max_deviation": 0.004 if mismatches else None,
        "bound": 0.015,
        "intervals": [
            {"t_s": 5.0, "tflops": 702.3, "sm_clock_mhz": 1560, "power_w": 699.1, "temp_max_c": 61,
             "reasons": {"sw-power-cap": 0.9}},
            {"t_s": 60.0, "tflops": 688.0, "sm_clock_mhz": 1500, "power_w": 700.2, "temp_max_c": 67,
             "reasons": {"sw-power-cap": 1.0}},
        ],
    }  # fmt: skip
    total = errors + len(failures)
    doc.update(schema=3, tester_version="1.2")
    doc["burn"] = {
        "seconds": 60.0,
        "devices": [device],
        "failures": list(failures),
        "errors": total,
        "dcgm": {"available": False, "reason": "dcgmi is not in this image"},
    }
    if total:
        doc.update(status="fail", reason="burn-errors")
    return doc


def log(doc: dict[str, Any]) -> str:
    return f"status: {doc['status']}\nACAGPU_RESULT {json.dumps(doc)}\n"


def report(doc: dict[str, Any], *fmt: str) -> Any:
    return CliRunner().invoke(cli, ["tester-report", "--from-file", "-", *fmt], input=log(doc))


def test_a_clean_burn_passes_with_its_telemetry() -> None:
    result = parse_tester_output(log(burn_doc(0, mismatches=2)))
    assert result.passed and result.burn is not None and result.burn["errors"] == 0
    res = report(burn_doc(0, mismatches=2))
    assert res.exit_code == 0, res.output
    assert "burn: 60.0 s, 0 error(s)" in res.stdout
    assert "30 checks, 0 errors, 2 mismatches; at the end SM 1500 MHz, 700.2 W, 67 °C" in res.stdout
    assert "dcgm diag: not run (dcgmi is not in this image)" in res.stdout


@pytest.mark.parametrize(
    ("errors", "failures"), [(1, ()), (0, ("gpu0: RuntimeError: CUDA error: an illegal memory access",))]
)
def test_burn_errors_fail_the_run(errors: int, failures: tuple[str, ...]) -> None:
    doc = burn_doc(errors, failures=failures)
    result = parse_tester_output(log(doc))
    assert (result.status, result.reason) == ("fail", "burn-errors")
    res = report(doc, "-o", "json")
    assert res.exit_code == 5, res.output
    body = json.loads(res.stdout)["result"]
    assert (body["status"], body["reason"]) == ("fail", "burn-errors")
    assert body["burn"]["errors"] == errors + len(failures)


def test_a_pass_that_carries_burn_errors_is_judged_failed() -> None:
    """acagpu judges the evidence: a result saying pass beside burn errors is no pass."""
    doc = burn_doc(0)
    doc["burn"]["devices"][0]["errors"] = 2
    assert doc["status"] == "pass"
    result = parse_tester_output(log(doc))
    assert (result.status, result.reason) == ("fail", "burn-errors")
    assert report(doc).exit_code == 5
