"""Shell completion offers values, not just flags: GPU aliases, regions, and the runs that exist."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli


def _complete(words: str) -> list[str]:
    env = {"_ACAGPU_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()))}
    if not words.endswith(" "):
        env["COMP_CWORD"] = str(len(words.split()) - 1)
    result = CliRunner().invoke(cli, [], prog_name="acagpu", env=env)
    return [line.split(",", 1)[1] for line in result.stdout.splitlines() if "," in line]


def test_gpu_and_region_values() -> None:
    assert "a100" in _complete("acagpu up --gpu a")
    assert set(_complete("acagpu validate --gpu t")) >= {"t4"}
    assert _complete("acagpu profiles -l swedenc") == ["swedencentral"]


def test_run_ids_come_from_the_subscription(emu: Any) -> None:
    assert CliRunner().invoke(cli, ["up", "--yes", "--run-id", "comp1", "--keep"]).exit_code == 0
    try:
        assert _complete("acagpu down --run-id ") == ["comp1"]
        assert _complete("acagpu smi --run-id x") == []
    finally:
        assert CliRunner().invoke(cli, ["down", "--run-id", "comp1", "--yes"]).exit_code == 0
