"""Microsoft's Azure CLI containerapp extension recordings (tests/fixtures/cli-extension-recordings,
November 2025, api 2025-10-02-preview / 2025-07-01) replayed against the emulator.

Each recording is replayed in order on a fresh emulator (tests/emulator/replay.py); every answer is
compared with Azure's on shape (status, LRO headers, key sets, id/name/time forms:
test_replay_compare.check_pair) and on the fields acagpu reads (replay_fields.py). What differs
today and is known is listed in KNOWN, each entry under the class of issue 22 it belongs to (0: found
here, not in that list). A difference not in KNOWN fails the test, and so does an entry of KNOWN
that no longer matches anything, so the list only shrinks: delete the entries of a class once the
emulator answers like Azure.

The recordings were made in the stage region `northcentralusstage`; it is replayed as
`northcentralus` (the emulator offers public regions only), its display name likewise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.versions import APP_VERSIONS
from tests.emulator.helpers import SCALE
from tests.emulator.replay import NOT_EMULATED, RECORDED_SUB, Replay, classify, make_group, ready_env
from tests.emulator.replay_fields import check_fields, check_log_lines
from tests.emulator.test_replay_compare import Pair, check_pair

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "cli-extension-recordings"
# Were an api-version refused, the replay would resend with this one (none is since class 2 was fixed).
FALLBACK_VERSION = "2025-07-01"
ENV_RG, ENV_NAME, REGION = "client.env_rg_northcentralus", "env-northcentralus", "northcentralus"
# A job execution must still run when the recording read it running (class 3 is read from it): at
# 0.02 an idle CI machine once read it ended; 0.1 gives it five times the wall time (+3 s).
SLOW = {"test_containerappjob_logstream.jsonl": 0.1}


def _load(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    text = text.replace("North Central US (Stage)", "North Central US").replace("northcentralusstage", REGION)
    return [json.loads(line) for line in text.splitlines() if line]


RECORDED = {path.name: _load(path) for path in sorted(FOLDER.glob("*.jsonl"))}


@dataclass(frozen=True)
class Known:
    """A difference the emulator has today: `cls` of issue 22, the kinds it shows on, a regex."""

    cls: int
    kinds: tuple[str, ...]
    pattern: str
    why: str

    def covers(self, kind: str, diff: str) -> bool:
        return (kind in self.kinds or "*" in self.kinds) and re.search(self.pattern, diff) is not None


_LOG_DIFF = r"^(headers \['content-type'\] != recorded \[\]|body '.*' != recorded '\{\"TimeStamp)"
KNOWN: list[Known] = [
    # 1-7: the emulator answers as Azure did (cross-group, api-versions, -1 codes, Consumption-only,
    # secrets, status codes and headers, server defaults)
    # 8: the opening lines match; what the containers printed, and when, cannot
    Known(8, ("logstream.app", "logstream.job"), _LOG_DIFF, "other lines and stamps; no content-type"),
    # 0: found by this replay, not in issue 22's list
    Known(
        0,
        ("job-op.result",),
        r"unexpected \['tags'\]",
        "PATCH result keys",
    ),
    Known(0, ("app.list", "job.list"), r"unexpected \['tags'\]", "tags on listed apps and jobs"),
    Known(0, ("job.list",), r"^headers \['api-supported-versions', 'content-type'\]", "list header"),
    # the pod-template hash is 8-10 characters on Azure (9 in the 2023 recording, 10 here); ours is 9
    Known(
        0, ("replicas.list", "replica.get"), r"^name shape '\{\}--7-9-5' != recorded '\{\}--7-10-5'$", "hash"
    ),
]


# ---- the replay ----------------------------------------------------------------------------------
def prepare(server: EmulatorServer, items: list[dict[str, Any]]) -> None:
    """What the CLI's test set-up made before recording: the groups, the shared environment."""
    make_group(server, "clitest.rg000001", REGION)
    if any(f"/resourceGroups/{ENV_RG}/" in item["uri"] for item in items):
        make_group(server, ENV_RG, REGION)
        ready_env(server, ENV_RG, ENV_NAME, REGION)


@dataclass
class Outcome:
    pairs: list[Pair]
    diffs: list[tuple[str, str]]  # (kind, difference)


def _mapper(server: EmulatorServer, replay: Replay) -> Any:
    def mapped(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.replace(RECORDED_SUB, server.subscription)
        return "/".join(replay.names.get(seg, seg) for seg in value.split("/"))

    return mapped


def differences(pair: Pair, mapped: Any) -> list[str]:
    diffs = check_pair(pair) + check_fields(pair, mapped) + check_log_lines(pair)
    if pair.refused_version:
        diffs.insert(0, f"api-version {pair.refused_version} refused")
    return diffs


def replay_all() -> dict[str, Outcome]:
    results: dict[str, Outcome] = {}
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        assert server.ctx is not None
        for name, items in RECORDED.items():
            server.reset()
            server.ctx.clock.scale = SCALE
            prepare(server, items)
            server.ctx.clock.scale = SLOW.get(name, SCALE)
            replay = Replay(server, fallback_version=FALLBACK_VERSION)
            replay.replay(items)
            mapped = _mapper(server, replay)
            diffs = [(p.kind, d) for p in replay.pairs for d in differences(p, mapped)]
            results[name] = Outcome(replay.pairs, diffs)
    return results


def in_scope(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded calls the emulator plays (all but the CLI's own Log Analytics set-up)."""
    return [i for i in items if not any(s in i["uri"] for s in NOT_EMULATED)]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return replay_all()


# ---- the tests -----------------------------------------------------------------------------------
def test_every_recorded_interaction_is_classified() -> None:
    unknown = {classify(i["method"], i["uri"]) for items in RECORDED.values() for i in items}
    assert not {k for k in unknown if k.startswith("unclassified")}
    assert len(RECORDED) >= 8


def test_emulator_answers_like_azure_but_for_known_differences(outcomes: dict[str, Outcome]) -> None:
    """One replay of every recording (module-wide: the replays are the cost). Fails on a recorded
    call that was not replayed, on a difference KNOWN does not list, and on an entry of KNOWN that
    no longer matches anything: once the emulator is fixed, the entry must go, so the list shrinks
    as fixes land."""
    problems: list[str] = []
    for name, outcome in outcomes.items():
        if len(outcome.pairs) != len(in_scope(RECORDED[name])):
            problems.append(f"{name}: {len(outcome.pairs)} of {len(in_scope(RECORDED[name]))} calls replayed")
        unknown = sorted({f"{kind}: {d}" for kind, d in outcome.diffs if not _known(kind, d)})
        problems += [f"{name}: {d}" for d in unknown]
    seen = {k for o in outcomes.values() for kind, d in o.diffs for k in KNOWN if k.covers(kind, d)}
    problems += [
        f"class {k.cls} ({k.why}) no longer differs: delete this entry from KNOWN"
        for k in KNOWN
        if k not in seen
    ]
    assert not problems, "\n".join(problems)


def _known(kind: str, diff: str) -> bool:
    return any(k.covers(kind, diff) for k in KNOWN)


def test_a_known_entry_covers_only_its_kinds() -> None:
    entry = Known(6, ("app.put",), r"^status 200", "x")
    assert entry.covers("app.put", "status 200 != recorded 201")
    assert not entry.covers("job.put", "status 200 != recorded 201")
    assert Known(2, ("*",), r"refused", "x").covers("env.get", "api-version 1 refused")


# The versions the emulator serves beyond the November 2025 lists (the 2026 spec; SDK 5.1.0: 2026-07-01).
NEWER_THAN_RECORDED = ("2026-03-02-preview", "2026-07-01")


def test_each_resource_type_lists_the_versions_recorded_for_it(outcomes: dict[str, Outcome]) -> None:
    """Azure's `api-supported-versions` is per resource type (jobs and their operations start at
    2022-11-01-preview, apps and environments at 2022-03-01): each answer lists what Azure listed
    for that type in November 2025, then the newer versions the emulator serves."""
    assert APP_VERSIONS[-len(NEWER_THAN_RECORDED) :] == NEWER_THAN_RECORDED
    compared: set[str] = set()
    for outcome in outcomes.values():
        for pair in outcome.pairs:
            recorded = pair.recorded["response_headers"].get("api-supported-versions")
            if recorded is None:
                continue
            want = [v.strip() for v in recorded.split(",")] + list(NEWER_THAN_RECORDED)
            have = [v.strip() for v in pair.headers.get("api-supported-versions", "").split(",")]
            assert have == want, f"{pair.kind}: {have} != recorded {want}"
            compared.add(pair.kind.split(".")[0])
    assert {"app", "app-op", "env", "env-op", "job", "job-op", "executions", "replicas"} <= compared
