"""The output contract every command shares: the envelope, one error channel, --query, tsv, GitHub."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.cli import profiles as profiles_cmd
from aca_gpu.errors import WaitTimedOut
from aca_gpu.output import Output, annotation, escape_data, escape_property, render_tsv


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_every_document_carries_schema_and_command() -> None:
    code, out, _ = _run("profiles", "--offline", "-o", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["schema"], doc["command"]) == (1, "profiles")


def test_group_commands_name_their_whole_path(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}", encoding="utf-8")
    _, out, _ = _run("report", "merge", str(bad), "-o", "json")
    assert json.loads(out)["command"] == "report merge"


def test_query_and_tsv() -> None:
    code, out, _ = _run("profiles", "--offline", "--query", "profiles[].type", "-o", "tsv")
    assert code == 0
    assert out.splitlines()[0] == "Consumption-GPU-NC8as-T4" and len(out.splitlines()) == 5
    code, out, _ = _run("profiles", "--offline", "--query", "profiles[0].[type, gpu_count]", "-o", "json")
    assert json.loads(out) == ["Consumption-GPU-NC8as-T4", 1]
    code, out, _ = _run("profiles", "--offline", "--query", "length(profiles)", "-o", "tsv")
    assert out == "5\n"


def test_bad_query_is_bad_input_before_any_work() -> None:
    code, out, err = _run("profiles", "--offline", "--query", "profiles[", "-o", "json")
    assert code == 2 and "--query" in err
    assert json.loads(out)["error"]["exit_code"] == 2


def test_tsv_shapes() -> None:
    assert render_tsv("x") == "x"
    assert render_tsv([1, "a", None, True]) == "1\na\n\ntrue"
    assert render_tsv([{"a": 1, "b": "x", "c": {"nested": 1}}, {"a": 2, "b": "y"}]) == "1\tx\n2\ty"
    assert render_tsv({"a": 1, "b": [1, 2], "c": "z"}) == "1\tz"


def test_github_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c") == "a%3A b%2C c"
    line = annotation("error", "two\nlines", title="acagpu up: x")
    assert line == "::error title=acagpu up%3A x::two%0Alines"


def test_error_document_is_printed_once() -> None:
    out, err = io.StringIO(), io.StringIO()
    output = Output("json", stdout=out, stderr=err, command="up", github=False)
    doc = {"status": "failed", "error": {"message": "boom", "code": None, "exit_code": 4, "hint": None}}
    output.emit(doc, "")
    output.fail("boom", exit_code=4)
    assert json.loads(out.getvalue())["error"]["message"] == "boom"  # exactly one document
    assert err.getvalue() == "error: boom\n"


def test_typed_error_maps_to_its_exit_code_and_annotation(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(location: str | None = None) -> dict[str, object]:
        raise WaitTimedOut("waited 5s for\nthe thing", code="Slow", hint="try again")

    monkeypatch.setattr(profiles_cmd, "catalog_document", slow)
    code, out, err = _run("profiles", "--offline", "-o", "json", "--github")
    assert code == 4
    assert json.loads(out)["error"] == {
        "message": "waited 5s for\nthe thing",
        "code": "Slow",
        "exit_code": 4,
        "hint": "try again",
    }
    assert "::error title=acagpu profiles::waited 5s for%0Athe thing" in err


def test_ctrl_c_is_130_with_a_document(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(location: str | None = None) -> dict[str, object]:
        raise KeyboardInterrupt

    monkeypatch.setattr(profiles_cmd, "catalog_document", interrupted)
    code, out, err = _run("profiles", "--offline", "-o", "json")
    assert code == 130 and "error: interrupted" in err and "Aborted" not in err
    assert json.loads(out)["error"]["exit_code"] == 130


def test_unexpected_exception_is_one_line_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(location: str | None = None) -> dict[str, object]:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(profiles_cmd, "catalog_document", broken)
    code, out, err = _run("profiles", "--offline")
    assert code == 1 and out == ""
    assert err.splitlines()[0] == "error: unexpected ZeroDivisionError: division by zero"
    assert "Traceback" not in err
    result = CliRunner().invoke(cli, ["--debug", "profiles", "--offline"])
    assert isinstance(result.exception, ZeroDivisionError)  # --debug lets it through


def test_usage_errors_are_exit_2_with_a_document() -> None:
    code, out, err = _run("status", "--bogus", "-o", "json")
    assert code == 2 and err.startswith("error: No such option '--bogus'")
    assert "Usage:" not in err
    assert json.loads(out)["command"] == "status"


def test_sdk_loggers_are_silent_unless_debug() -> None:
    _run("profiles", "--offline")
    assert logging.getLogger("azure.core.pipeline").getEffectiveLevel() > logging.CRITICAL
    assert logging.getLogger("urllib3").getEffectiveLevel() > logging.CRITICAL


def test_github_writes_a_summary_for_any_command(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    code, _, _ = _run("profiles", "--offline", "--github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert code == 0 and "### acagpu profiles: ok" in summary.read_text(encoding="utf-8")
    code, _, _ = _run(
        "compat", "--image", "x", "--driver", "1", "--github", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert code == 2 and "### acagpu compat: failed (exit 2)" in summary.read_text(encoding="utf-8")


def test_columns_limit_the_table_width() -> None:
    code, out, _ = _run("profiles", "--offline", env={"COLUMNS": "60"})
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 60


def test_summary_lines_fold_under_their_value_column() -> None:
    from aca_gpu.output import wrap_lines

    text = "run x: ok\n  cost           " + "word " * 30 + "\n  short          fine"
    folded = wrap_lines(text, 60).splitlines()
    assert max(len(line) for line in folded) <= 60
    assert folded[0] == "run x: ok" and folded[-1] == "  short          fine"
    assert all(line.startswith(" " * 17 + "word") for line in folded[2:-1])


def test_piped_human_output_is_not_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # CI runners export it without a terminal
    out = io.StringIO()
    Output("table", stdout=out, stderr=io.StringIO(), github=False).emit({}, "x" * 300)
    assert out.getvalue() == "x" * 300 + "\n"


def test_the_group_knows_the_same_formats_as_output() -> None:
    import aca_gpu.cli as group
    import aca_gpu.output as output

    assert group.FORMATS == output.FORMATS


def test_identical_gpus_are_counted_not_repeated() -> None:
    from aca_gpu.output import count_names

    assert count_names(["NVIDIA A100 80GB PCIe"] * 4) == "4 x NVIDIA A100 80GB PCIe"
    assert count_names(["T4", "A100", "T4"]) == "2 x T4, A100"
    assert count_names([]) == ""


def test_tsv_of_a_listing_prints_its_rows_like_az() -> None:
    """`profiles --offline -o tsv` printed `1<TAB>profiles` (the envelope) and dropped the rows."""
    code, out, _ = _run("profiles", "--offline", "-o", "tsv")
    assert code == 0
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) > 3 and rows[0] != ["1", "profiles"], out
    assert any("Consumption-GPU-NC8as-T4" in row for row in rows), out


def test_a_refusal_for_want_of_yes_and_an_interrupt_carry_a_code_a_script_can_test() -> None:
    """`error.code` was null for both: a script could tell them apart only by parsing the message."""
    from aca_gpu.errors import Interrupted

    code, out, err = _run("up", "-o", "json")  # CliRunner's stdin is no terminal
    error = json.loads(out)["error"]
    assert (code, error["code"], error["exit_code"]) == (2, "ConfirmationRequired", 2), out
    assert error["hint"] and "--yes" in error["hint"] and "hint: add --yes" in err
    assert Interrupted("interrupted: run r1 stopped").as_dict()["code"] == "Interrupted"
