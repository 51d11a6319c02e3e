"""Replay the real ARM recordings (tests/fixtures/arm-recordings) against the emulator, kind by kind.

Each recording is replayed in order on a fresh emulator state (tests/emulator/replay.py says how).
Then, per (method, path template):
status code, the kept LRO headers, the body's top-level and `properties` keys, id/type/name shapes,
timestamp forms, tokens and event-stream lines must match what live Azure answered.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import jwt
import pytest

from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.versions import APP_VERSIONS, RESOURCES_VERSIONS
from tests.emulator.helpers import SCALE
from tests.emulator.replay import (
    NOT_EMULATED,
    Replay,
    arm_call,
    classify,
    load_recordings,
    make_group,
    ready_env,
)
from tests.emulator.test_replay_compare import Pair, check_pair, last_segment, state

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "arm-recordings"
RECORDED = load_recordings(RECORDINGS)
KINDS = sorted(
    {
        (classify(i["method"], i["uri"]), i["status"])
        for items in RECORDED.values()
        for i in items
        if not any(s in i["uri"] for s in NOT_EMULATED)
    }
)


def prepare(server: EmulatorServer, name: str, replay: Replay) -> None:
    for rg in ("clitest.rg000001", "client.env_rg_eastus"):
        make_group(server, rg)
    if name in ("test_containerapp_exec.jsonl", "test_containerapp_job_executionstest_e2e.jsonl"):
        ready_env(server, "client.env_rg_eastus", "env-eastus")
    if name == "test_containerapp_env_e2e.delete-tail.jsonl":
        ready_env(server, "clitest.rg000001", "containerapp-e2e-env000002")
    if name == "test_containerapp_env_workload_profiles_e2e.excerpt.jsonl":
        # The excerpt polls an operation whose request was not recorded: stand in an env delete's.
        ready_env(server, "clitest.rg000001", "env-profiles")
        path = "/resourceGroups/clitest.rg000001/providers/Microsoft.App/managedEnvironments/env-profiles"
        location = arm_call(server, "DELETE", path).headers["Location"]
        recorded_op = last_segment(RECORDED[name][0]["uri"])
        replay.names[recorded_op] = last_segment(location)


# Scale-to-zero after the cooldown would take the exec recording's replica away mid-replay at the
# suite's fast time scale; that recording runs slower so its replica outlives its ~30 calls.
SLOW_FILES = {"test_containerapp_exec.jsonl": 0.01}


@pytest.fixture(scope="module")
def replayed() -> Iterator[dict[str, list[Pair]]]:
    by_kind: dict[str, list[Pair]] = defaultdict(list)
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        assert server.ctx is not None
        for name, items in RECORDED.items():
            server.reset()
            server.ctx.clock.scale = SCALE
            replay = Replay(server)
            prepare(server, name, replay)
            server.ctx.clock.scale = SLOW_FILES.get(name, SCALE)
            replay.replay(items)
            SENT[name] = len(replay.pairs)
            for pair in replay.pairs:
                by_kind[pair.kind].append(pair)
        yield by_kind


SENT: dict[str, int] = {}  # recording -> calls the replay sent and paired with an answer


# ---- the tests -----------------------------------------------------------------------------------
def test_every_recorded_interaction_is_classified() -> None:
    unknown = [kind for kind, _ in KINDS if kind.startswith("unclassified")]
    assert not unknown
    assert len(KINDS) >= 25  # the files are all there


@pytest.mark.parametrize(("kind", "status"), KINDS, ids=[f"{k}-{s}" for k, s in KINDS])
def test_emulator_answers_like_the_recording(replayed: dict[str, list[Pair]], kind: str, status: int) -> None:
    pairs = [p for p in replayed[kind] if p.recorded["status"] == status]
    assert pairs, f"no emulator answer was paired with a recorded {kind} {status}"
    problems = {f"{p.recorded['method']} {p.url}: {d}" for p in pairs for d in check_pair(p)}
    assert not problems, "\n".join(sorted(problems))


def test_every_in_scope_call_is_replayed(replayed: dict[str, list[Pair]]) -> None:
    """Every recorded call the emulator plays (all but the CLI's Log Analytics set-up) is sent."""
    for name, items in RECORDED.items():
        wanted = [i for i in items if not any(s in i["uri"] for s in NOT_EMULATED)]
        assert SENT[name] == len(wanted), f"{name}: {SENT[name]} of {len(wanted)} calls replayed"


def test_every_transient_state_was_seen_before_the_end(replayed: dict[str, list[Pair]]) -> None:
    """The emulator really goes through InProgress / 202 (it is not instantly done)."""
    seen = {
        (p.kind, state(p.status, p.body)[0], p.body.get("status") if isinstance(p.body, dict) else None)
        for k in replayed
        for p in replayed[k]
    }
    assert ("env-op.status", 200, "InProgress") in seen
    assert ("env-op.result", 202, None) in seen
    assert ("env-op.result", 204, None) in seen


def test_recorded_api_versions_are_accepted() -> None:
    newest: dict[str, str] = {}
    for items in RECORDED.values():
        for item in items:
            version = dict(parse_qsl(urlsplit(item["uri"]).query)).get("api-version")
            if version is None or any(s in item["uri"] for s in NOT_EMULATED):
                continue
            if "/providers/Microsoft.App?" in item["uri"]:
                assert version in RESOURCES_VERSIONS
            elif urlsplit(item["uri"]).netloc == "management.azure.com":
                assert version in APP_VERSIONS
            header = item["response_headers"].get("api-supported-versions")
            if header and "2024-03-01" in header:
                newest[item["uri"]] = header
    # every version the 2024 service listed is one the emulator takes too
    listed = {v.strip() for h in newest.values() for v in h.split(",")}
    assert listed and listed <= set(APP_VERSIONS)


def test_tokens_have_the_recorded_claims(replayed: dict[str, list[Pair]]) -> None:
    base = {"capp_sub", "capp_rg", "capp_jit_expiry", "nbf", "exp", "iat", "iss", "aud"}
    for kind, scope_claim in (("app.token", "capp_name"), ("env.token", "kubeenv_name")):
        for pair in replayed[kind]:
            token = pair.body["properties"]["token"]
            assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "JWT"}
            claims = jwt.decode(token, options={"verify_signature": False})
            assert set(claims) == base | {scope_claim}
            assert claims["iss"] == "AzureContainerApps" and claims["exp"] - claims["iat"] == 3600
            expires = pair.body["properties"]["expires"]
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,7}Z", expires)
            assert calendar.timegm(time.strptime(expires[:19], "%Y-%m-%dT%H:%M:%S")) == claims["exp"]


def test_secrets_are_not_echoed(replayed: dict[str, list[Pair]]) -> None:
    """The recorded env PUT sent a Log Analytics sharedKey; ARM answered it as null."""
    sent = [p for p in replayed["env.put"] if "log-analytics" in json.dumps(p.recorded["request_body"])]
    assert sent
    for pair in sent + replayed["env.get"]:
        logs = (pair.body.get("properties") or {}).get("appLogsConfiguration") or {}
        assert (logs.get("logAnalyticsConfiguration") or {}).get("sharedKey") is None
