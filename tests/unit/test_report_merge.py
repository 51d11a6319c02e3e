from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.errors import BadInput
from aca_gpu.workflow.tester import report


def _pair(image: str, gpu: str, status: str = "pass", **extra: object) -> dict[str, object]:
    return {"image": image, "gpu": gpu, "status": status, **extra}


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_merge_builds_matrix_newest_first(tmp_path: Path) -> None:
    a = _write(
        tmp_path / "a.json",
        {
            "results": [
                _pair(
                    "nvidia/cuda:12.1.1-runtime-ubuntu22.04", "t4", bf16_tflops=None, driver_version="550.1"
                )
            ]
        },
    )
    b = _write(
        tmp_path / "b.json", [_pair("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "a100", bf16_tflops=250.4)]
    )
    c = _write(
        tmp_path / "c.json",
        _pair("nvidia/cuda:13.0.0-runtime-ubuntu24.04", "t4", "fail", reason="container refused to start"),
    )
    matrix = report.merge_files([a, b, c])
    assert matrix.images == [
        "nvidia/cuda:13.0.0-runtime-ubuntu24.04",
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
    ]
    assert matrix.gpus == ["a100", "t4"]
    md = report.render_markdown(matrix)
    assert "| `nvidia/cuda:12.4.1-runtime-ubuntu22.04` | ✅ pass" in md
    assert "bf16 250" in md
    assert "container refused to start" in md
    assert matrix.as_dict()["failed"] == 1


@pytest.mark.parametrize("doc", [{"results": [{"image": "x"}]}, "text", 3])
def test_merge_rejects_non_results(tmp_path: Path, doc: object) -> None:
    with pytest.raises(BadInput):
        report.merge_files([_write(tmp_path / "x.json", doc)])


def test_cli_merge_json_summary_and_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    ok = _write(tmp_path / "ok.json", _pair("nvidia/cuda:12.1.1-base-ubuntu22.04", "t4"))
    bad = _write(
        tmp_path / "bad.json", _pair("nvidia/cuda:13.0.0-base-ubuntu24.04", "t4", "fail", reason="nvml")
    )
    result = CliRunner().invoke(cli, ["report", "merge", str(ok), "-o", "json", "--github"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["passed"] == 1
    assert "acagpu CUDA image validation" in summary.read_text(encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", "merge", str(ok), str(bad)])
    assert result.exit_code == 5
    assert "nvml" in result.stdout


def test_cli_merge_missing_file_is_bad_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "merge", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_merge_into_grows_the_matrix_and_fails_only_on_new_failures(tmp_path: Path) -> None:
    """compat/matrix.json across two runs: old verdicts stay, a pair validated again is replaced,
    `tags --not-in` then leaves out every tag the matrix holds, and an old failure does not turn a
    later run red."""
    matrix = tmp_path / "compat" / "matrix.json"
    old = "nvidia/cuda:13.1.0-runtime-ubuntu24.04"
    first = _write(tmp_path / "1.json", {"results": [_pair(old, "t4", "fail", reason="cuda>=13.1")]})
    result = CliRunner().invoke(cli, ["report", "merge", str(first), "--into", str(matrix), "-o", "json"])
    assert result.exit_code == 5  # a new pair failed
    assert json.loads(matrix.read_text(encoding="utf-8"))["failed"] == 1

    new = "nvidia/cuda:12.9.1-runtime-ubuntu22.04"
    second = _write(tmp_path / "2.json", {"results": [_pair(new, "t4"), _pair(new, "a100")]})
    md = tmp_path / "compat" / "matrix.md"
    result = CliRunner().invoke(
        cli, ["report", "merge", str(second), "--into", str(matrix), "--markdown", str(md), "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr  # the old failure is history, not this run's
    doc = json.loads(matrix.read_text(encoding="utf-8"))
    assert doc["images"] == [old, new] and doc["gpus"] == ["a100", "t4"]
    assert (doc["passed"], doc["failed"]) == (2, 1)
    assert "❌ fail" in md.read_text(encoding="utf-8") and "✅ pass" in md.read_text(encoding="utf-8")

    again = _write(tmp_path / "3.json", [_pair(old, "t4", "pass")])  # re-validated after a driver update
    assert CliRunner().invoke(cli, ["report", "merge", str(again), "--into", str(matrix)]).exit_code == 0
    doc = json.loads(matrix.read_text(encoding="utf-8"))
    assert (doc["passed"], doc["failed"], len(doc["results"])) == (3, 0, 3)

    from aca_gpu.registry.tags import tags_in_text

    assert tags_in_text(matrix.read_text(encoding="utf-8")) == {
        "13.1.0-runtime-ubuntu24.04",
        "12.9.1-runtime-ubuntu22.04",
    }


def test_a_refused_pair_shows_no_figure_and_the_predicted_driver() -> None:
    """The explorer never started, so nvidia-smi said nothing and the tester's figure came from
    another image: the cell says refused, with the driver and CUDA the prediction compared."""
    refused = {
        "image": "nvidia/cuda:13.0.0-base-ubuntu24.04",
        "gpu": "t4",
        "status": "fail",
        "reason": "container refused: requirement error: unsatisfied condition: cuda>=13.0",
        "driver_version": None,
        "cuda_version": None,
        "bf16_tflops": 25.0,
        "refused": "requirement error: unsatisfied condition: cuda>=13.0",
        "preflight": {"driver_version": "550.54.15", "cuda_version": "13.0.0", "verdict": "incompatible"},
    }
    text = report.render_markdown(report.Matrix((refused,)))
    (row,) = [line for line in text.splitlines() if line.startswith("| `nvidia/cuda:13.0.0")]
    assert "❌ refused" in row and "bf16" not in row and "?" not in row, row
    assert "driver 550.54.15" in row and "13.0.0" in row, row


def test_validate_counts_pairs_the_runtime_would_refuse() -> None:
    from aca_gpu.config import Settings
    from aca_gpu.output import NullProgress
    from aca_gpu.workflow.engine.plan import ValidateRequest, make_validate_plan
    from aca_gpu.workflow.tester import validate as validate_flow

    plan = make_validate_plan(
        Settings(),
        ValidateRequest(images=("nvidia/cuda:12.8.0-base-ubuntu24.04",), gpus=("t4",), driver="550.144.03"),
        owner="me",
    )
    progress = NullProgress()
    validate_flow.predictions(plan, progress, None)
    assert progress.notes == ["1 pair(s), 1 predicted to fail (incompatible, or refused by the runtime)"]
