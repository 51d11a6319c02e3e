"""`acagpu tester-report`: exit 0 on pass, 5 on fail, 2 when no result; -o json prints one document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tester"


def _body(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8").split("\n", 2)[2]


@pytest.mark.parametrize(
    ("fixture", "code", "status"),
    [("h100-default.txt", 0, "pass"), ("cpu-no-cuda.txt", 5, "fail"), ("seed-legacy.txt", 0, "pass")],
)
def test_json_report_and_exit_code(tmp_path: Path, fixture: str, code: int, status: str) -> None:
    path = tmp_path / "out.log"
    path.write_text(_body(fixture), encoding="utf-8")
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", str(path), "-o", "json"])
    assert res.exit_code == code, res.output
    doc = json.loads(res.stdout)
    assert doc["result"]["status"] == status and doc["schema"] == 1


def test_reads_stdin_and_renders_for_people() -> None:
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", "-"], input=_body("h100-default.txt"))
    assert res.exit_code == 0, res.output
    assert "NVIDIA H100 80GB HBM3" in res.stdout
    assert "bf16" in res.stdout and "% of peak" in res.stdout


def test_no_result_exits_2_with_one_line() -> None:
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", "-", "-o", "json"], input="Killed\n")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"]["exit_code"] == 2
    assert "error: no ACAGPU_RESULT line" in res.stderr


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", str(tmp_path / "nope.log")])
    assert res.exit_code == 2 and "cannot read" in res.stderr


def test_per_gpu_telemetry_line_and_evidence() -> None:
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", "-"], input=_body("h100-telemetry.txt"))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    per_gpu = lines.index("per GPU:")
    assert lines[per_gpu + 1].startswith(
        "  gpu0 NVIDIA H100 80GB HBM3: bf16 691.8 TFLOP/s (70% of peak, 84% of 819"
    )
    assert "power-capped" in lines[per_gpu + 1]
    assert lines[per_gpu + 2].startswith("    gpu0 sw-power-cap in 100% of")
    doc = json.loads(
        CliRunner()
        .invoke(cli, ["tester-report", "--from-file", "-", "-o", "json"], input=_body("h100-telemetry.txt"))
        .stdout
    )
    (gpu,) = doc["result"]["gpu_telemetry"]
    assert gpu["verdict"] == "power-capped" and gpu["sm_clock_mhz"] == 1515 and doc["result"]["schema"] == 2


def test_no_gpu_report_says_telemetry_was_unavailable() -> None:
    body = (
        'ACAGPU_RESULT {"schema":2,"status":"fail","reason":"no-cuda","mode":"cpu-only",'
        '"telemetry":{"available":false,"reason":"no CUDA device"}}\n'
    )
    res = CliRunner().invoke(cli, ["tester-report", "--from-file", "-"], input=body)
    assert res.exit_code == 5
    assert "telemetry unavailable (no CUDA device)" in res.stdout


def _cut(fixture: str, *, status: str | None) -> str:
    """This tester's own log cut before its result line, its status line rewritten (or cut too)."""
    kept = [line for line in _body(fixture).splitlines() if not line.startswith(("ACAGPU_RESULT", "status:"))]
    return "\n".join(kept + ([f"status: {status}"] if status else [])) + "\n"


def test_a_cut_log_of_this_tester_is_never_judged_by_the_legacy_rule() -> None:
    """The legacy `Elapsed Time:` rule is for the seed's tester only: a cut log of this tester saying
    fail is a fail (5), and one that says nothing has no result (2), never `pass [legacy format]`."""
    failed = CliRunner().invoke(
        cli,
        ["tester-report", "--from-file", "-", "-o", "json"],
        input=_cut("h100-default.txt", status="fail (incorrect) in 7.4s"),
    )
    doc = json.loads(failed.stdout)
    assert failed.exit_code == 5, failed.output
    assert doc["result"]["status"] == "fail" and doc["result"]["legacy"] is False, doc["result"]
    assert "result line" in (doc["result"]["reason"] or ""), doc["result"]
    silent = CliRunner().invoke(
        cli, ["tester-report", "--from-file", "-"], input=_cut("h100-default.txt", status=None)
    )
    assert silent.exit_code == 2 and "cut" in silent.stderr and "legacy" not in silent.output, silent.output
