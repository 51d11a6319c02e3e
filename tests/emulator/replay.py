"""Replaying recorded ARM traffic against the emulator: what each recorded call is (its kind), and a
Replay that sends the calls in order and pairs every answer with the recorded one.

Used by test_replay.py (tests/fixtures/arm-recordings) and test_replay_cli.py
(tests/fixtures/cli-extension-recordings). A recorded call is sent with the same method, path
(subscription mapped, names kept, random names learned from the emulator's own answers) and
api-version. A recorded state the CLI had waited for (Succeeded, Running, 204) is waited for here
too; a recorded transient state (InProgress, Waiting, 202) may already be past.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests

from aca_gpu.emulator.server import EmulatorServer
from tests.emulator.test_replay_compare import Pair, is_later, last_segment, matches, state

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
    ("app-op.result", "GET", _LOC + "/containerappOperationResults/{x}"),
    ("job-op.status", "GET", _LOC + "/containerappsjobOperationStatuses/{x}"),
    ("job-op.result", "GET", _LOC + "/containerappsjobOperationResults/{x}"),
    ("env.list", "GET", _RG + "/managedEnvironments"),
    ("env.get", "GET", _RG + "/managedEnvironments/{x}"),
    ("env.put", "PUT", _RG + "/managedEnvironments/{x}"),
    ("env.patch", "PATCH", _RG + "/managedEnvironments/{x}"),
    ("env.delete", "DELETE", _RG + "/managedEnvironments/{x}"),
    ("env.token", "POST", _RG + "/managedEnvironments/{x}/getAuthToken"),
    ("env.usages", "GET", _RG + "/managedEnvironments/{x}/usages"),
    ("app.list", "GET", _RG + "/containerApps"),
    ("app.get", "GET", _RG + "/containerApps/{x}"),
    ("app.put", "PUT", _RG + "/containerApps/{x}"),
    ("app.patch", "PATCH", _RG + "/containerApps/{x}"),
    ("app.delete", "DELETE", _RG + "/containerApps/{x}"),
    ("app.token", "POST", _RG + "/containerApps/{x}/getAuthToken"),
    ("app.secrets", "POST", _RG + "/containerApps/{x}/listSecrets"),
    ("revisions.list", "GET", _RG + "/containerApps/{x}/revisions"),
    ("revision.get", "GET", _RG + "/containerApps/{x}/revisions/{x}"),
    ("replicas.list", "GET", _RG + "/containerApps/{x}/revisions/{x}/replicas"),
    ("replica.get", "GET", _RG + "/containerApps/{x}/revisions/{x}/replicas/{x}/"),  # trailing / as recorded
    ("job.list", "GET", _RG + "/jobs"),
    ("job.get", "GET", _RG + "/jobs/{x}"),
    ("job.put", "PUT", _RG + "/jobs/{x}"),
    ("job.patch", "PATCH", _RG + "/jobs/{x}"),
    ("job.delete", "DELETE", _RG + "/jobs/{x}"),
    ("job.token", "POST", _RG + "/jobs/{x}/getAuthToken"),
    ("job.secrets", "POST", _RG + "/jobs/{x}/listSecrets"),
    ("job.start", "POST", _RG + "/jobs/{x}/start"),
    ("executions.list", "GET", _RG + "/jobs/{x}/executions"),
    ("execution.get", "GET", _RG + "/jobs/{x}/executions/{x}"),
    ("execution.replicas", "GET", _RG + "/jobs/{x}/executions/{x}/replicas"),
    ("job.stop", "POST", _RG + "/jobs/{x}/stop/{x}"),
    ("eventstream.app", "GET", "/resourceGroups/{x}/containerApps/{x}/eventstream"),
    ("eventstream.env", "GET", "/resourceGroups/{x}/managedEnvironments/{x}/eventstream"),
    (
        "logstream.app",
        "GET",
        "/resourceGroups/{x}/containerApps/{x}/revisions/{x}/replicas/{x}/containers/{x}/logstream",
    ),
    (
        "logstream.job",
        "GET",
        "/resourceGroups/{x}/jobs/{x}/executions/{x}/replicas/{x}/containers/{x}/logstream",
    ),
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


def load_recordings(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for path in sorted(folder.glob("*.jsonl"))
    }


def _scope(uri: str) -> str:
    path = urlsplit(uri).path
    return "env" if "/managedEnvironments/" in path else "job" if "/jobs/" in path else "app"


@dataclass
class Replay:
    """Sends recorded calls in order. `fallback_version`, when set, resends a call whose api-version
    the emulator refused with that version, so one refused version does not hide every later
    difference (the refusal is kept on the pair as `refused_version`)."""

    server: EmulatorServer
    fallback_version: str | None = None
    names: dict[str, str] = field(default_factory=dict)  # recorded random names/op ids -> the emulator's
    tokens: dict[str, str] = field(default_factory=dict)  # "app" / "env" / "job" -> the emulator's last JWT
    pairs: list[Pair] = field(default_factory=list)
    session: requests.Session = field(default_factory=requests.Session)

    def url(self, uri: str, version: str | None = None) -> str:
        parts = urlsplit(uri.replace(RECORDED_SUB, self.server.subscription))
        path = "/".join(self.names.get(seg, seg) for seg in parts.path.split("/"))
        query = parts.query
        if version is not None:
            query = urlencode([(k, version if k == "api-version" else v) for k, v in parse_qsl(query)])
        return f"{self.server.endpoint}{path}" + (f"?{query}" if query else "")

    def send(self, item: dict[str, Any], version: str | None = None) -> requests.Response:
        url = self.url(item["uri"], version)
        data_plane = "azurecontainerapps.dev" in urlsplit(item["uri"]).netloc
        auth = self.tokens[_scope(item["uri"])] if data_plane else self.server.token
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
        props, mine = rec.get("properties") or {}, got.get("properties") or {}
        if kind in ("app.get", "app.put") and props.get("latestRevisionName") and mine:
            self.names[props["latestRevisionName"]] = mine.get("latestRevisionName") or ""
        if kind in ("replicas.list", "executions.list", "execution.replicas"):
            for r, g in zip(rec.get("value") or [], got.get("value") or [], strict=False):
                self.names[r["name"]] = g["name"]
        if kind == "job.start" and "name" in rec and "name" in got:
            self.names[rec["name"]] = got["name"]
        if kind in ("app.token", "env.token", "job.token") and "properties" in got:
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

    def _send_accepted(self, item: dict[str, Any]) -> tuple[requests.Response, str | None]:
        resp = self.send(item)
        if self.fallback_version and resp.status_code == 400 and "InvalidApiVersionParameter" in resp.text:
            refused = dict(parse_qsl(urlsplit(item["uri"]).query)).get("api-version")
            return self.send(item, self.fallback_version), refused
        return resp, None

    def _one(self, kind: str, item: dict[str, Any], run: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + SETTLE_S
        while True:
            resp, refused = self._send_accepted(item)
            body = resp.text if kind.startswith(("logstream", "eventstream")) else _body(resp)
            got = state(resp.status_code, body)
            if matches(state(item["status"], item["response_body"]), got):
                chosen, ahead = item, False
                break
            later = next((r for r in run if matches(state(r["status"], r["response_body"]), got)), None)
            if later is not None and is_later(state(item["status"], item["response_body"]), got):
                chosen, ahead = later, True
                break
            if item["method"] != "GET" and is_later(state(item["status"], item["response_body"]), got):
                chosen, ahead = item, True  # a write answered with its work already done
                break
            if time.monotonic() > deadline or not _behind(kind, item, got):
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
                refused_version=refused,
            )
        )


_EARLY = {"InProgress", "Waiting", "NotRunning", "Processing", "Activating", "Provisioning", "Running", 202}


def _behind(kind: str, item: dict[str, Any], got: tuple[Any, ...]) -> bool:
    """Worth asking again: the emulator is at an earlier state of what Azure answered (an LRO still
    running, a replica or execution not there yet); anything else is its final answer."""
    if item["method"] != "GET":
        return False
    want = state(item["status"], item["response_body"])
    if is_later(got, want) or any(g != w and g in _EARLY for g, w in zip(got, want, strict=True)):
        return True
    return ("replicas" in kind or "executions" in kind) and got[1] and not want[1]


def _body(resp: requests.Response) -> Any:
    if not resp.content:
        return ""
    try:
        return resp.json()
    except ValueError:
        return resp.text


# ---- prerequisites the CLI's test framework created outside the recordings ------------------------
def arm_call(
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


def make_group(server: EmulatorServer, rg: str, location: str = "eastus") -> None:
    arm_call(server, "PUT", f"/resourcegroups/{rg}", {"location": location}, version="2025-04-01")


def ready_env(server: EmulatorServer, rg: str, name: str, location: str = "eastus") -> None:
    body = {
        "location": location,
        "properties": {"workloadProfiles": [{"name": "Consumption", "workloadProfileType": "Consumption"}]},
    }
    arm_call(server, "PUT", f"/resourceGroups/{rg}{_S}/managedEnvironments/{name}", body)
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        got = arm_call(server, "GET", f"/resourceGroups/{rg}{_S}/managedEnvironments/{name}").json()
        if got["properties"]["provisioningState"] == "Succeeded":
            return
        time.sleep(0.02)
    raise AssertionError(f"environment {name} never became ready")
