"""The actions acagpu's workflows use, pinned by commit sha, and the rewrite `ci init --upgrade` does.

GitHub's hosted runners run JavaScript actions on Node 24 only since 2026-09-16: an action whose
`action.yml` declares `runs.using: node20` at the pinned commit is run on a runtime it was never
built for. `templates/github/pins.json` holds, for every action acagpu writes or runs, the commit,
its release tag and the `runs.using` its action.yml declares at that commit (read from the action's
own repository). The templates, the project's own `.github/` and the root `action.yml` are checked
against it (tests/unit/test_pins.py), and `ci init --upgrade` rewrites the `uses:` lines of a
repository's acagpu workflows to it, so users get the new pins without losing their own edits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from aca_gpu.resources import template_path

# `- uses: owner/name[/path]@ref # comment`, as a step key or a list item
USES = re.compile(
    r"^(?P<lead>\s*(?:-\s+)?uses:\s*)(?P<action>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?P<sub>/[^@\s]*)?"
    r"@(?P<ref>[^\s#]+)(?P<comment>[ \t]*#[^\n]*)?$",
    re.MULTILINE,
)
_SHA = re.compile(r"^[0-9a-f]{40}$")
_NODE = re.compile(r"^node(\d+)$")


@dataclass(frozen=True)
class Pin:
    action: str  # owner/name, lower case (GitHub's owner and name are case-insensitive)
    sha: str
    version: str
    runs_using: str

    @property
    def node(self) -> int | None:
        match = _NODE.match(self.runs_using)
        return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Use:
    """One `uses:` line as written."""

    line: int
    action: str
    ref: str
    comment: str

    @property
    def version(self) -> str:
        """The version the trailing comment names (`# v7.0.1`), or ''."""
        words = self.comment.lstrip(" \t#").split()
        return words[0] if words else ""


@cache
def table() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(template_path("github", "pins.json").read_text("utf-8"))
    return found


def pins() -> dict[str, Pin]:
    return {
        name.lower(): Pin(name.lower(), entry["sha"], entry["version"], entry["runs_using"])
        for name, entry in table()["actions"].items()
    }


def min_node() -> int:
    return int(table()["min_node"])


def uses_in(text: str) -> list[Use]:
    """Every remote `uses:` of a workflow or action file (local `./` and `docker://` are not pins)."""
    found = []
    for match in USES.finditer(text):
        found.append(
            Use(
                line=text.count("\n", 0, match.start()) + 1,
                action=match.group("action").lower(),
                ref=match.group("ref"),
                comment=match.group("comment") or "",
            )
        )
    return found


def problems(text: str, where: str = "") -> list[str]:
    """Why each `uses:` in `text` is not a current, Node-24 pin (empty: all are)."""
    known = pins()
    wrong = []
    for use in uses_in(text):
        at = f"{where}:{use.line}: {use.action}@{use.ref}"
        pin = known.get(use.action)
        if pin is None:
            wrong.append(f"{at}: not in templates/github/pins.json")
        elif not _SHA.match(use.ref):
            wrong.append(f"{at}: not pinned by a full commit sha")
        elif use.ref != pin.sha:
            wrong.append(f"{at}: not the pinned {pin.version} ({pin.sha})")
        elif use.version != pin.version:
            wrong.append(f"{at}: the comment says {use.version or 'nothing'}, the sha is {pin.version}")
        if pin is not None and (pin.node is None or pin.node < min_node()):
            wrong.append(
                f"{at}: {pin.version} declares runs.using {pin.runs_using} (needs node{min_node()}+)"
            )
    return wrong


@dataclass(frozen=True)
class Change:
    line: int
    action: str
    old: str  # the version the comment named, else the ref
    new: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.action} {self.old} -> {self.new}"


def upgrade(text: str) -> tuple[str, list[Change]]:
    """`text` with every `uses:` of a pinned action at its current pin (sha and version comment);
    actions not in the table are left as they are. Returns the new text and what changed."""
    known = pins()
    changes: list[Change] = []

    def one(match: re.Match[str]) -> str:
        action = match.group("action").lower()
        pin = known.get(action)
        comment = match.group("comment") or ""
        if pin is None or (match.group("ref") == pin.sha and f"# {pin.version}" in comment):
            return match.group(0)
        use = Use(text.count("\n", 0, match.start()) + 1, action, match.group("ref"), comment)
        changes.append(Change(use.line, action, use.version or use.ref, pin.version))
        name = f"{match.group('action')}{match.group('sub') or ''}"
        return f"{match.group('lead')}{name}@{pin.sha} # {pin.version}"

    return USES.sub(one, text), changes
