"""Replay the real ARM recordings (tests/fixtures/arm-recordings) against the emulator, kind by kind.

Each recording is replayed in order on a fresh emulator state: the same method, path (subscription
mapped, names kept, random names learned from the emulator's own answers) and api-version. A
recorded state the CLI had waited for (Succeeded, Running, 204) is waited for here too; a recorded
transient state (InProgress, Waiting, 202) may already be past. Then, per (method, path template):
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jwt
import pytest
import requests

from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.emulator.versions import APP_VERSIONS, RESOURCES_VERSIONS
from tests.emulator.helpers import SCALE
from tests.emulator.test_replay_compare import (
    Pair,
    check_pair,
    is_later,
    last_segment,
    matches,
    state,
)

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "arm-recordings"
RECORDED_SUB = "00000000-0000-0000-0000-000000000000"
SETTLE_S = 10.0

# (kind, method, path template after /subscriptions/{sub}); {x} is one segment; matched case-insensitively.
_S = "/providers/Microsoft.App"
_RG = "/resourceGroups/{x}" + _S
_LOC = _S + "/locations/{x}"
TEMPLATES: list[tuple[str, str, str]] = [
    ("provider.get", "GET", _S),
    ("usages.subscription", "GET", _LOC + "/usages"),
    ("profile-types.list", "GET", _LOC + "/availableManagedEnvironmentsWorkloadProfileTypes"),
    ("env-op.status", "GET", _LOC + "/managedEnvironmentOperationStatuses/{x}"),
    ("env-op.result", "GET", _LOC + "/managedEnvironmentOperationResults/{x}"),
    ("app-op.status", "GET", _LOC + "/containerappOperationStatuses/{x}"),
    ("job-op.status", "GET", _LOC + "/containerappsjobOperationStatuses/{x}"),
    ("env.list", "GET", _RG + "/managedEnvironments"),
    ("env.get", "GET", _RG + "/managedEnvironments/{x}"),
    ("env.put", "PUT", _RG + "/managedEnvironments/{x}"),
    ("env.delete", "DELETE", _RG + "/managedEnvironments/{x}"),
    ("env.token", "POST", _RG + "/managedEnvironments/{x}/getAuthToken"),
    ("env.usages", "GET", _RG + "/managedEnvironments/{x}/usages"),
    ("app.get", "GET", _RG + "/containerApps/{x}"),
    ("app.put", "PUT", _RG + "/containerApps/{x}"),
    ("app.token", "POST", _RG + "/containerApps/{x}/getAuthToken"),
    ("revision.get", "GET", _RG + "/containerApps/{x}/revisions/{x}"),
    ("replicas.list", "GET", _RG + "/containerApps/{x}/revisions/{x}/replicas"),
    ("replica.get", "GET", _RG + "/containerApps/{x}/revisions/{x}/replicas/{x}/"),  # trailing / as recorded
    ("job.get", "GET", _RG + "/jobs/{x}"),
    ("job.put", "PUT", _RG + "/jobs/{x}"),
    ("job.start", "POST", _RG + "/jobs/{x}/start"),
    ("executions.list", "GET", _RG + "/jobs/{x}/executions"),
    ("execution.get", "GET", _RG + "/jobs/{x}/executions/{x}"),
    ("job.stop", "POST", _RG + "/jobs/{x}/stop/{x}"),
    ("eventstream.app", "GET", "/resourceGroups/{x}/containerApps/{x}/eventstream"),
    ("eventstream.env", "GET", "/resourceGroups/{x}/managedEnvironments/{x}/eventstream"),
]
# Recorded calls to services the emulator does not play (the CLI's own Log Analytics setup).
NOT_EMULATED = ("/providers/Microsoft.OperationalInsights/",)


def _template_regex(template: str) -> re.Pattern[str]:
    body = re.escape(template).replace(re.escape("{x}"), "[^/]+")
    return re.compile("/subscriptions/[^/]+" + body, re.IGNORECASE)


_COMPILED = [(kind, method, _template_regex(t)) for kind, method, t in TEMPLATES]


def classify(method: str, uri: str) -> str:
    path = urlsplit(uri).path
    for kind, m, rx in _COMPILED:
        if m == method and rx.fullmatch(path):
            return kind
    return f"unclassified {method} {path}"


def load_recordings() -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for path in sorted(RECORDINGS.glob("*.jsonl"))
    }


RECORDED = load_recordings()
KINDS = sorted(
    {
        (classify(i["method"], i["uri"]), i["status"])
        for items in RECORDED.values()
        for i in items
        if not any(s in i["uri"] for s in NOT_EMULATED)
    }
)


# ---- the replay ----------------------------------------------------------------------------------


@dataclass
class Replay:
    server: EmulatorServer
    names: dict[str, str] = field(default_factory=dict)  # recorded random names/op ids -> the emulator's
    tokens: dict[str, str] = field(default_factory=dict)  # "app" / "env" -> the emulator's last JWT
    pairs: list[Pair] = field(default_factory=list)
    session: requests.Session = field(default_factory=requests.Session)

    def url(self, uri: str) -> str:
        parts = urlsplit(uri.replace(RECORDED_SUB, self.server.subscription))
        path = "/".join(self.names.get(seg, seg) for seg in parts.path.split("/"))
        return f"{self.server.endpoint}{path}" + (f"?{parts.query}" if parts.query else "")

    def send(self, item: dict[str, Any]) -> requests.Response:
        url = self.url(item["uri"])
        data_plane = "azurecontainerapps.dev" in urlsplit(item["uri"]).netloc
        if data_plane:
            scope = "env" if "/managedEnvironments/" in item["uri"] else "app"
            auth = self.tokens[scope]
        else:
            auth = self.server.token
        headers = {"Authorization": f"Bearer {auth}"}
        body = None
        if item["request_body"] is not None:
            body = json.dumps(item["request_body"]).replace(RECORDED_SUB, self.server.subscription)
            headers["Content-Type"] = "application/json"
        return self.session.request(
            item["method"], url, data=body, headers=headers, verify=self.server.ca_bundle, timeout=10
        )

    def learn(self, kind: str, rec: Any, got: Any, rec_headers: dict[str, str], got_headers: Any) -> None:
        for name in ("azure-asyncoperation", "location"):
            if name in rec_headers and name in got_headers:
                self.names[last_segment(rec_headers[name])] = last_segment(got_headers[name])
        if not isinstance(rec, dict) or not isinstance(got, dict):
            return
        if kind in ("app.get", "app.put") and rec["properties"].get("latestRevisionName"):
            self.names[rec["properties"]["latestRevisionName"]] = got["properties"]["latestRevisionName"]
        if kind in ("replicas.list", "executions.list"):
            for r, g in zip(rec["value"], got["value"], strict=False):
                self.names[r["name"]] = g["name"]
        if kind == "job.start":
            self.names[rec["name"]] = got["name"]
        if kind in ("app.token", "env.token"):
            self.tokens[kind.split(".")[0]] = got["properties"]["token"]

    def replay(self, items: list[dict[str, Any]]) -> None:
        for i, item in enumerate(items):
            if any(s in item["uri"] for s in NOT_EMULATED):
                continue
            kind = classify(item["method"], item["uri"])
            run = [item]  # this poll and the identical ones recorded after it
            for later in items[i + 1 :]:
                if later["uri"] != item["uri"] or later["method"] != item["method"]:
                    break
                run.append(later)
            self._one(kind, item, run)

    def _one(self, kind: str, item: dict[str, Any], run: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + SETTLE_S
        while True:
            resp = self.send(item)
            body = _body(resp)
            got = state(resp.status_code, body)
            if matches(state(item["status"], item["response_body"]), got):
                chosen, ahead = item, False
                break
            later = next((r for r in run if matches(state(r["status"], r["response_body"]), got)), None)
            if later is not None and is_later(state(item["status"], item["response_body"]), got):
                chosen, ahead = later, True
                break
            if time.monotonic() > deadline or item["method"] != "GET":
                chosen, ahead = item, False
                break
            time.sleep(0.02)
        self.learn(kind, chosen["response_body"], body, chosen["response_headers"], resp.headers)
        self.pairs.append(
            Pair(
                kind=kind,
                recorded=chosen,
                status=resp.status_code,
                headers={k.lower(): v for k, v in resp.headers.items()},
                body=body,
                text=resp.text,
                url=resp.url,
                ahead=ahead,
            )
        )


def _body(resp: requests.Response) -> Any:
    if not resp.content:
        return ""
    try:
        return resp.json()
    except ValueError:
        return resp.text


# ---- prerequisites the CLI's test framework created outside the recordings ------------------------
def _arm(
    server: EmulatorServer, method: str, path: str, body: Any = None, version: str = "2024-03-01"
) -> Any:
    resp = requests.request(
        method,
        f"{server.endpoint}/subscriptions/{server.subscription}{path}",
        params={"api-version": version},
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=10,
    )
    assert resp.status_code < 300, resp.text
    return resp


def _ready_env(server: EmulatorServer, rg: str, name: str) -> None:
    body = {
        "location": "eastus",
        "properties": {"workloadProfiles": [{"name": "Consumption", "workloadProfileType": "Consumption"}]},
    }
    _arm(server, "PUT", f"/resourceGroups/{rg}{_S}/managedEnvironments/{name}", body)
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        got = _arm(server, "GET", f"/resourceGroups/{rg}{_S}/managedEnvironments/{name}").json()
        if got["properties"]["provisioningState"] == "Succeeded":
            return
        time.sleep(0.02)
    raise AssertionError(f"environment {name} never became ready")


def prepare(server: EmulatorServer, name: str, replay: Replay) -> None:
    for rg in ("clitest.rg000001", "client.env_rg_eastus"):
        _arm(server, "PUT", f"/resourcegroups/{rg}", {"location": "eastus"}, version="2025-04-01")
    if name in ("test_containerapp_exec.jsonl", "test_containerapp_job_executionstest_e2e.jsonl"):
        _ready_env(server, "client.env_rg_eastus", "env-eastus")
    if name == "test_containerapp_env_e2e.delete-tail.jsonl":
        _ready_env(server, "clitest.rg000001", "containerapp-e2e-env000002")
    if name == "test_containerapp_env_workload_profiles_e2e.excerpt.jsonl":
        # The excerpt polls an operation whose request was not recorded: stand in an env delete's.
        _ready_env(server, "clitest.rg000001", "env-profiles")
        path = f"/resourceGroups/clitest.rg000001{_S}/managedEnvironments/env-profiles"
        location = _arm(server, "DELETE", path).headers["Location"]
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
            for pair in replay.pairs:
                by_kind[pair.kind].append(pair)
        yield by_kind


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
