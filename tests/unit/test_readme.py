"""The README's command list is what the commands' own --help says (regenerate: `make readme`)."""

from __future__ import annotations

from pathlib import Path

from aca_gpu.cli import helpdoc

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_command_list_is_generated_from_help() -> None:
    text = README.read_text(encoding="utf-8")
    block = text[text.index(helpdoc.START) : text.index(helpdoc.END) + len(helpdoc.END)]
    assert block == helpdoc.render(), "README command list is stale: run `make readme`"


def test_every_command_is_in_the_list() -> None:
    from aca_gpu.cli import COMMANDS

    block = helpdoc.render()
    for name in COMMANDS:
        assert f"`acagpu {name}" in block, name


def test_splice_replaces_only_the_block() -> None:
    text = f"before\n{helpdoc.START}\nold\n{helpdoc.END}\nafter\n"
    assert helpdoc.splice(text, "NEW") == "before\nNEW\nafter\n"
