"""Flags refused as bad input: `acagpu run` refuses a flag it would ignore and a download folder it
could never write; a bad `--notify` URL is said in one plain line.

Both used to cost a run: a single `run --retries 2` started its container once and never retried
(`--output-dir`, `--logs`, `--parallel`, `--max-deliveries` were dropped the same way), and a
fan-out whose `--output-dir` could not be made ran and billed every shard before exit 7. Each is
now bad input: one line, exit 2, before anything is made (the embedded emulator is never started).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli

FANOUT = "only applies with --shards, --map or --rerun-failed"


def _refused(tmp_path: Path, *args: str) -> str:
    argv = ["run", "--emulator", "--yes", "-o", "json", *args, "busybox", "--", "sh", "-c", "exit 1"]
    result = CliRunner().invoke(cli, argv, env={"ACAGPU_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)  # exactly one document
    assert doc["status"] == "error" and doc["error"]["exit_code"] == 2, doc
    message: str = doc["error"]["message"]
    return message


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--retries", "2"), f"--retries {FANOUT}"),
        (("--retry-on-exit", "1"), f"--retry-on-exit {FANOUT}"),
        (("--platform-retries", "5"), f"--platform-retries {FANOUT}"),
        (("--parallel", "3"), f"--parallel {FANOUT}"),
        (("--logs", "none"), f"--logs {FANOUT}"),
        (("--output-dir", "out"), f"--output-dir {FANOUT}"),
        (("--max-deliveries", "2"), "--max-deliveries only applies with --workers"),
        (("--shards", "2", "--max-deliveries", "2"), "--max-deliveries only applies with --workers"),
        (
            ("--env", "lab", "--map", "items.txt", "--workers", "2", "--logs", "none"),
            "--logs belong to a fan-out",
        ),
        (
            ("--env", "lab", "--map", "items.txt", "--workers", "2", "--platform-retries", "1"),
            "--platform-retries belong to",
        ),
    ],
)
def test_a_flag_the_run_would_ignore_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "items.txt").write_text("a\nb\n")
    assert said in _refused(tmp_path, *args)
    assert not (tmp_path / "out").exists()


def test_the_flags_defaults_and_a_fanout_are_not_refused(tmp_path: Path) -> None:
    """The rule reads what was given, not the values: a default or an explicit 0 is no flag."""
    plan = ["run", "--emulator", "--yes", "--dry-run", "-o", "json", "--retries", "0"]
    result = CliRunner().invoke(cli, [*plan, "busybox"], env={"ACAGPU_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    shards = ["--shards", "2", "--retries", "1", "--logs", "failed", "--parallel", "2"]
    result = CliRunner().invoke(cli, [*plan, *shards, "busybox"], env={"ACAGPU_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["shards"]["retries"] == 1


@pytest.mark.parametrize("where", ["afile/out", "afile"])
def test_an_output_dir_that_cannot_be_written_is_refused_before_the_shards_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("a file where a folder would go\n")
    said = _refused(tmp_path, "--env", "lab", "--shards", "2", "--output-dir", where)
    assert said.startswith(f"--output-dir {where}: "), said
    assert {p.name for p in tmp_path.iterdir()} <= {"afile", "cache"}  # no folder made under it
    assert (tmp_path / "afile").read_text() == "a file where a folder would go\n"


def test_an_output_dir_to_be_made_is_left_unmade_until_the_downloads(tmp_path: Path) -> None:
    from aca_gpu.workflow.fanout.spec import check_makeable

    check_makeable(tmp_path / "new" / "deep", "--output-dir new/deep")
    assert list(tmp_path.iterdir()) == []  # proved makeable, nothing left behind
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        with pytest.raises(Exception, match="cannot write there"):
            check_makeable(tmp_path / "ro" / "out", "--output-dir ro/out")


def test_a_bad_notify_url_names_the_flag_once(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["reap", "--notify", "notaurl"], env={"ACAGPU_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 2
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert (
        line
        == "error: Invalid value for '--notify': expected an https:// webhook URL (http:// only to localhost)"
    )


def test_exec_timeout_takes_a_duration_like_every_other_flag(tmp_path: Path) -> None:
    """`exec --timeout 2s` was refused with "'2s' is not a valid float range" (`test --timeout 2s`
    works); a bare number stays seconds."""
    from aca_gpu.cli.options import Seconds

    assert [Seconds().convert(v, None, None) for v in ("2s", "5m", "90", 2.5)] == [2.0, 300.0, 90.0, 2.5]
    env = {"ACAGPU_CACHE_DIR": str(tmp_path)}
    for bad, said in [
        ("2x", "'2x' is not a duration"),
        ("0.5", "'0.5': at least 1 s"),
        ("nan", "at least 1 s"),
    ]:
        result = CliRunner().invoke(cli, ["exec", "--run-id", "r1", "--timeout", bad, "--", "true"], env=env)
        assert result.exit_code == 2, result.output
        (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
        assert line.startswith("error: Invalid value for '--timeout': ") and said in line, line
