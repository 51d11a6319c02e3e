"""The command reference, docs/commands.md, is what the commands' own --help says (regenerate it
with `make docs`), on any terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aca_gpu.cli import helpdoc

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "commands.md"


def test_command_reference_is_generated_from_help() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert text == helpdoc.render(), "docs/commands.md is stale: run `make docs`"


def test_every_command_has_its_section() -> None:
    from aca_gpu.cli import COMMANDS

    text = helpdoc.render()
    for name in COMMANDS:
        assert f"\n## acagpu {name}" in text, name  # a group's name heads each of its commands


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make docs` on a narrow terminal, with settings in the environment, writes the same file."""
    before = helpdoc.render()
    for key, value in {
        "COLUMNS": "40",
        "LINES": "10",
        "ACAGPU_LOCATION": "westus3",
        "ACAGPU_GPU": "a100",
        "ACAGPU_ENV": "lab",
    }.items():
        monkeypatch.setenv(key, value)
    assert helpdoc.render() == before


def test_links_into_the_reference_name_a_section() -> None:
    """README's and docs' links to `commands.md#...` land on a heading that exists."""
    anchors = {helpdoc.anchor(m) for m in re.findall(r"^## (.+)$", helpdoc.render(), re.M)}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for fragment in re.findall(r"commands\.md#([a-z0-9-]+)", page.read_text(encoding="utf-8")):
            assert fragment in anchors, (page.name, fragment)


def test_the_docs_and_examples_cite_only_commands_that_exist_and_no_section_they_lack() -> None:
    """A newcomer follows what the docs name: `acagpu config` (no such command) and a "§10" whose
    document is not in the repository sent one nowhere."""
    from aca_gpu.cli import COMMANDS

    texts = {p: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *ROOT.glob("docs/*.md"),
                                                         *ROOT.glob("examples/*.py")]}  # fmt: skip
    cited = {(p.name, m) for p, t in texts.items() for m in re.findall(r"`acagpu ([a-z][a-z-]*)", t)}
    assert {c for c in cited if c[1] not in COMMANDS} == set()
    sections = {(p.name, m) for p, t in texts.items() for m in re.findall(r"§ ?\d+", t)}
    assert sections == set(), "cite a section by a link or a heading of this repository"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["stauts"], "No such command 'stauts'. Did you mean 'status'?"),
        (["env", "lsit"], "No such command 'lsit'. Did you mean 'list'?"),
        (["image", "stge"], "No such command 'stge'. Did you mean 'stage'?"),
        (["xyzzy"], "No such command 'xyzzy'."),
    ],
)
def test_a_mistyped_command_gets_the_nearest_one_as_a_mistyped_flag_does(args: list[str], said: str) -> None:
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"error: {said}", result.stderr
