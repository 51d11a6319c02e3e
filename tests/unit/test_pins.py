"""Every action acagpu writes or runs is a Node-24 release pinned by commit sha (templates/github/pins.json),
and `ci init --upgrade` moves an existing repository's acagpu workflows to those pins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.workflow.ci import pins as ci_pins

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "templates" / "github").glob("*.y*ml"),
        *(ROOT / ".github").rglob("*.y*ml"),
        ROOT / "action.yml",
    ]
)
OLD = """    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          persist-credentials: false
      - name: Azure login (OIDC)
        uses: azure/login@a457da9ea143d694b1b9c7c869ebb04ebe844ef5 # v2.3.0
      - uses: someone/else@v1 # not acagpu's: left alone
      - uses: actions/upload-artifact/merge@v4
"""


def test_the_table_pins_node24_releases_by_full_sha() -> None:
    table = ci_pins.pins()
    assert set(table) >= {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/download-artifact",
        "azure/login",
    }
    for pin in table.values():
        assert re.fullmatch(r"[0-9a-f]{40}", pin.sha), pin
        assert re.fullmatch(r"v\d+\.\d+\.\d+", pin.version), pin
        assert pin.node is not None and pin.node >= 24, f"{pin.action} {pin.version} runs {pin.runs_using}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_uses_is_a_current_node24_pin(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert ci_pins.uses_in(text), f"{path} uses no action: is the pattern still right?"
    assert ci_pins.problems(text, str(path.relative_to(ROOT))) == []


def test_problems_name_what_is_wrong() -> None:
    found = ci_pins.problems(OLD, "old.yml")
    assert any("actions/checkout" in p and "not the pinned v7" in p for p in found), found
    assert any("someone/else@v1: not in templates/github/pins.json" in p for p in found), found
    assert any("actions/upload-artifact@v4: not pinned by a full commit sha" in p for p in found), found
    pin = ci_pins.pins()["azure/login"]
    stale_comment = f"- uses: azure/login@{pin.sha} # v2.3.0\n"
    assert ci_pins.problems(stale_comment) == [
        f":1: azure/login@{pin.sha}: the comment says v2.3.0, the sha is {pin.version}"
    ]


def test_upgrade_rewrites_pinned_actions_only_and_says_what_changed() -> None:
    new, changes = ci_pins.upgrade(OLD)
    pins = ci_pins.pins()
    assert [(c.action, c.old, c.new) for c in changes] == [
        ("actions/checkout", "v4.2.2", pins["actions/checkout"].version),
        ("azure/login", "v2.3.0", pins["azure/login"].version),
        ("actions/upload-artifact", "v4", pins["actions/upload-artifact"].version),
    ]
    assert (
        f"- uses: actions/checkout@{pins['actions/checkout'].sha} # {pins['actions/checkout'].version}\n"
        in new
    )
    assert f"uses: actions/upload-artifact/merge@{pins['actions/upload-artifact'].sha} #" in new
    assert "- uses: someone/else@v1 # not acagpu's: left alone" in new
    assert "        with:\n          persist-credentials: false\n" in new  # the rest untouched
    again, none = ci_pins.upgrade(new)
    assert again == new and none == []


def test_ci_init_upgrade_moves_existing_workflows_to_the_pins(tmp_path: Path, acagpu_wheel: Path) -> None:
    base = ["ci", "init", "--repo-dir", str(tmp_path),
            "--subscription", "11111111-2222-3333-4444-555555555555",
            "--tenant", "66666666-7777-8888-9999-000000000000", "--client-id",
            "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "-l", "westus3", "--github-repo", "example/gpu-ci",
            "--wheel", str(acagpu_wheel), "--no-lock-hashes"]  # fmt: skip
    first = CliRunner().invoke(cli, base)
    assert first.exit_code == 0, first.output
    reap = tmp_path / ".github/workflows/acagpu-reap.yml"
    current = reap.read_text(encoding="utf-8")
    checkout = ci_pins.pins()["actions/checkout"]
    # a repository written by an older acagpu, with a step its owner added
    older = current.replace(f"actions/checkout@{checkout.sha} # {checkout.version}",
                            "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2")  # fmt: skip
    older = older.replace(
        "      - name: Reap\n", "      - name: Mine\n        run: echo mine\n      - name: Reap\n"
    )
    reap.write_text(older, encoding="utf-8")
    done = CliRunner().invoke(cli, [*base, "--upgrade", "-o", "json"])
    assert done.exit_code == 0, done.output
    text = reap.read_text(encoding="utf-8")
    assert ci_pins.problems(text) == [] and "run: echo mine" in text
    import json

    doc = json.loads(done.stdout)
    assert doc["pins"] == [
        {"file": str(reap), "line": older.splitlines().index(
            next(x for x in older.splitlines() if "actions/checkout@11bd7" in x)) + 1,
         "action": "actions/checkout", "old": "v4.2.2", "new": checkout.version}
    ]  # fmt: skip
    human = CliRunner().invoke(cli, [*base, "--upgrade"])
    assert "pins: all current" in human.stdout
