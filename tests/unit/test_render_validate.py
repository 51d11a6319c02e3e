"""`validate`'s text form: the matrix, then each measured pair's per-GPU lines, then teardown."""

from __future__ import annotations

from typing import Any

from aca_gpu.workflow.tester.render import render_validate


def _doc(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "results": results,
        "teardown": {"status": "deleted", "verified": True},
        "phases": {"total": 12.0},
    }


def test_measured_pairs_print_their_gpu_lines_under_the_matrix() -> None:
    line = "GPU 0 NVIDIA A100: bf16 280.1 TFLOP/s (90 % of peak)"
    text = render_validate(
        _doc(
            [
                {"image": "img:1", "gpu": "a100", "status": "pass", "gpu_lines": [line]},
                {"image": "img:2", "gpu": "a100", "status": "fail", "reason": "too new", "gpu_lines": []},
            ]
        )
    )
    lines = text.splitlines()
    assert "img:1 on a100:" in lines
    assert lines[lines.index("img:1 on a100:") + 1] == f"  {line}"
    assert "img:2 on a100:" not in lines  # nothing measured, nothing to print
    assert lines[-2] == "teardown: deleted, verified gone"


def test_no_results_still_reports_teardown() -> None:
    assert render_validate(_doc([])).splitlines()[0] == "teardown: deleted, verified gone"
