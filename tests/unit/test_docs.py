"""The front page stays a front page, its links land, its exit codes are the code's, and the release
is named in one place that `acagpu --version`, the changelog and the packaging agree on."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.version import Version

from aca_gpu import __version__, errors

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CHANGELOG = ROOT / "CHANGELOG.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def _pages() -> list[Path]:
    return [README, CHANGELOG, *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, len(lines)
    assert "<details>" not in "\n".join(lines)  # the --help dumps live in docs/commands.md


def test_relative_links_land_on_a_file() -> None:
    missing = []
    for page in _pages():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            if not path.exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def _exit_table(text: str) -> dict[int, str]:
    return {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.+?) \|$", text, re.M)}


def test_exit_code_tables_are_the_codes_acagpu_uses() -> None:
    codes = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    for page in (README, ROOT / "docs" / "exit-codes.md"):
        assert set(_exit_table(page.read_text(encoding="utf-8"))) == codes, page.name


def test_version_is_in_one_place() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    done = subprocess.run(
        [sys.executable, "-m", "aca_gpu", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["acagpu,", "version", __version__]


def test_changelog_has_every_release_newest_first() -> None:
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\b", CHANGELOG.read_text(encoding="utf-8"), re.M)
    assert releases[0] == __version__, releases  # the newest section is the version acagpu says
    assert releases == sorted(releases, key=Version, reverse=True), releases
    assert releases[-1] == "0.1.0" and len(set(releases)) == len(releases), releases


def test_pages_cite_only_files_the_repository_has() -> None:
    """A file named in prose (`aca-2026.md §10` once was) is one a reader of the repository can open."""
    have = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts and ".git" not in p.parts}
    opted = "<!-- examples: run by tests/e2e/test_doc_examples.py -->"
    pages = [README, CHANGELOG, *(p for p in sorted((ROOT / "docs").glob("*.md")) if opted in p.read_text())]
    cited = {
        (page.name, name)
        for page in pages
        for name in re.findall(r"(?<![\w/.-])([\w-]+\.md)\b", page.read_text(encoding="utf-8"))
    }
    # files outside the repository a page may still name: none left, and it may only shrink
    known: set[tuple[str, str]] = set()
    missing = [(page, name) for page, name in sorted(cited) if name not in have]
    assert not [cite for cite in missing if cite not in known], missing
