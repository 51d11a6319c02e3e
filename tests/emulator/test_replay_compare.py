"""How an emulator answer is compared with a recorded one: status, kept headers, key sets, id/name/time
shapes, NDJSON lines; and the client's view of an LRO (which states are transient). Used by
test_replay.py; the helpers' own behaviour is tested here."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

KEPT_HEADERS = {
    "location",
    "azure-asyncoperation",
    "retry-after",
    "x-ms-ratelimit-remaining-subscription-writes",
    "content-type",
    "api-supported-versions",
}
SIGNED_QUERY = {"t", "c", "s", "h"}  # ARM's signature on operation URLs: opaque, not emulated

# Keys the emulator adds beyond a recorded body: each is a real ARM/ACA key the recorded API
# version did not return (or returned only for other configurations).
EXTRA_TOP: dict[str, set[str]] = {
    "env.get": {"tags"},
    "env.put": {"tags"},
    "env.list": {"tags"},
    "app.get": {"tags"},
    "app.put": {"tags"},
    "job.get": {"tags"},
    "job.put": {"tags"},
}
EXTRA_PROPS: dict[str, set[str]] = {
    "env.get": {"environmentMode", "peerTrafficConfiguration"},
    "env.put": {"environmentMode", "peerTrafficConfiguration"},
    "profile-types.list": {"applicability"},
    "job.get": {"outboundIpAddresses", "runningState"},
    "job.put": {"outboundIpAddresses", "runningState"},
    "app.get": {"delegatedIdentities"},  # in the 2024 recording, not the 2023 one
    "app.put": {"delegatedIdentities"},
    "executions.list": {"detailedStatus"},
    "execution.get": {"detailedStatus", "endTime", "reason", "message"},
}


@dataclass
class Pair:
    kind: str
    recorded: dict[str, Any]
    status: int
    headers: dict[str, str]
    body: Any
    text: str
    url: str
    ahead: bool = False  # the emulator was past a recorded transient state
    refused_version: str | None = None  # the recorded api-version the emulator refused (then resent)


def last_segment(url: str) -> str:
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]


TRANSIENT = {"InProgress": {"Succeeded"}, "Waiting": {"Succeeded"}, "Running": {"Succeeded", "Stopped"}}


def state(status: int, body: Any) -> tuple[Any, ...]:
    """What a client waits on: HTTP status, whether a list is empty, then the first object's LRO or
    execution status and its provisioning and running states (None: the recording has no such key)."""
    items = body.get("value") if isinstance(body, dict) and isinstance(body.get("value"), list) else [body]
    marks: list[Any] = [status, not items]
    one: dict[str, Any] = items[0] if items and isinstance(items[0], dict) else {}
    props: dict[str, Any] = one["properties"] if isinstance(one.get("properties"), dict) else {}
    marks += [
        one.get("status"),
        props.get("provisioningState"),
        props.get("runningState"),
        props.get("status"),
    ]
    return tuple(marks)


def matches(want: tuple[Any, ...], got: tuple[Any, ...]) -> bool:
    return all(w is None or w == g for w, g in zip(want, got, strict=True))


def is_later(want: tuple[Any, ...], got: tuple[Any, ...]) -> bool:
    """`got` is `want` with transient states moved on (202 -> 204, InProgress -> Succeeded, ...)."""
    if want[0] == 202 and got[0] in (200, 204):  # a Location-style poll: done, with or without a body
        return True
    return all(
        w is None or w == g or (isinstance(w, str) and g in TRANSIENT.get(w, set()))
        for w, g in zip(want, got, strict=True)
    )


# ---- shapes --------------------------------------------------------------------------------------
def id_shape(value: str) -> str:
    """Names out, keywords (and their case) kept: `/subscriptions/{}/resourceGroups/{}/providers/...`."""
    segs = value.split("/")
    out = segs[:1]
    for i in range(1, len(segs), 2):
        out.append(segs[i])
        if i + 1 < len(segs):
            out.append(segs[i + 1] if segs[i] == "providers" else "{}")
    return "/".join(out)


def name_shape(value: str, known: set[str]) -> str:
    """`{}--7-9-5` for a replica: the resource's own (fixed) name, then the lengths of random parts."""
    prefix = max((k for k in known if value.startswith(k)), key=len, default="")
    rest = value[len(prefix) :]
    return ("{}" if prefix else "") + re.sub(r"[a-z0-9]+", lambda m: str(len(m.group())), rest)


def time_shape(value: Any) -> str:
    if not isinstance(value, str):
        return repr(value)  # the recorded environment stream has an all-null "Reconciler error" line
    return re.sub(r"\d", "d", re.sub(r"\.\d+", ".f", value))


_TIME = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d")
FIXED_NAMES = {
    "clitest.rg000001",
    "client.env_rg_eastus",
    "env-eastus",
    "containerapp-e2e-env000002",
    "env000003",
    "capp000002",
    "containerapp-e2e000002",
    "job2000002",
}


def _objects(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, dict) and isinstance(body.get("value"), list):
        return [o for o in body["value"] if isinstance(o, dict)]
    return [body] if isinstance(body, dict) else []


def _kept(headers: dict[str, str]) -> set[str]:
    return {k.lower() for k in headers} & KEPT_HEADERS


def _url_shape(url: str) -> tuple[str, set[str]]:
    parts = urlsplit(url)
    return id_shape(parts.path), {k for k, _ in parse_qsl(parts.query)} - SIGNED_QUERY


# Recorded in June 2023 only (api 2023-04-01-preview): the app token came back as a jobs token. The
# 2024 recording of the same call answers containerApps/accesstoken, which the emulator follows.
SERVICE_QUIRKS = {("app.token", "Microsoft.App/jobs/accesstoken")}
# Keys only the 2023 preview API returned; today's API (and the 2024 recordings) have none of them.
RETIRED_PROPS = {"firstPartyConfiguration"}
# Values ARM decides whatever the request said: the emulator must answer them exactly as recorded.
SAME_VALUES = (
    ("location",),
    ("properties", "workloadProfileName"),
    ("properties", "runningStatus"),
    ("properties", "healthState"),
    ("properties", "active"),
    ("properties", "trafficWeight"),
    ("properties", "configuration", "activeRevisionsMode"),
    ("properties", "configuration", "triggerType"),
)


def check_pair(pair: Pair) -> list[str]:
    rec, got = pair.recorded, pair.body
    diffs: list[str] = []
    if pair.status != rec["status"]:
        diffs.append(f"status {pair.status} != recorded {rec['status']}")
    if _kept(pair.headers) != set(rec["response_headers"]):
        diffs.append(f"headers {sorted(_kept(pair.headers))} != recorded {sorted(rec['response_headers'])}")
    for name in ("azure-asyncoperation", "location"):
        if name in rec["response_headers"] and name in pair.headers:
            want, have = _url_shape(rec["response_headers"][name]), _url_shape(pair.headers[name])
            if want != have:
                diffs.append(f"{name} shape {have} != recorded {want}")
    if not pair.ahead and not matches(state(rec["status"], rec["response_body"]), state(pair.status, got)):
        diffs.append(
            f"state {state(pair.status, got)} != recorded {state(rec['status'], rec['response_body'])}"
        )
    recorded_body = rec["response_body"]
    if isinstance(recorded_body, dict) and "_omitted" in recorded_body:
        return diffs
    if isinstance(recorded_body, str):
        if recorded_body == "":
            if pair.text != "":
                diffs.append(f"body {pair.text[:80]!r} where the recording had none")
        elif pair.kind.startswith("eventstream"):
            diffs += check_ndjson(rec, pair.text)
        elif not isinstance(got, str) or got.replace(_mapped(pair), "{}") != _unmapped(pair, recorded_body):
            diffs.append(f"body {got!r} != recorded {recorded_body!r}")
        return diffs
    mine = {_key(o): o for o in _objects(got)}
    theirs = _objects(recorded_body)
    if theirs and all(_key(o) in mine for o in theirs):  # catalog lists: same entries, any order
        pairs = [(o, mine[_key(o)]) for o in theirs]
    else:
        pairs = list(zip(theirs, _objects(got), strict=False))
    for r_obj, g_obj in pairs:
        diffs += check_object(pair.kind, r_obj, g_obj)
    if len(theirs) and not mine:
        diffs.append("no objects where the recording had some")
    return diffs


def _key(obj: dict[str, Any]) -> str:
    name = obj.get("name")
    return str(name.get("value") if isinstance(name, dict) else name)


def _mapped(pair: Pair) -> str:
    return last_segment(pair.url.split("?")[0])


def _unmapped(pair: Pair, recorded: str) -> str:
    return recorded.replace(last_segment(pair.recorded["uri"].split("?")[0]), "{}")


def check_object(kind: str, rec: dict[str, Any], got: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    missing = set(rec) - set(got)
    extra = set(got) - set(rec) - EXTRA_TOP.get(kind, set())
    if missing or extra:
        diffs.append(f"top-level keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
    r_props, g_props = rec.get("properties"), got.get("properties")
    if isinstance(r_props, dict):
        if not isinstance(g_props, dict):
            diffs.append("no properties object")
        else:
            missing = set(r_props) - set(g_props) - RETIRED_PROPS
            extra = set(g_props) - set(r_props) - EXTRA_PROPS.get(kind, set())
            if missing or extra:
                diffs.append(f"properties keys: missing {sorted(missing)}, unexpected {sorted(extra)}")
            for key, value in r_props.items():
                mine = g_props.get(key)
                timed = isinstance(value, str) and _TIME.match(value) and isinstance(mine, str)
                if timed and time_shape(value) != time_shape(mine):
                    diffs.append(f"properties.{key} form {g_props[key]!r} != recorded {value!r}")
    for path in SAME_VALUES:
        want_v, have_v = _dig(rec, path), _dig(got, path)
        if want_v is not _ABSENT and want_v != have_v and not _quirk_value(rec, path):
            diffs.append(f"{'.'.join(path)} {have_v!r} != recorded {want_v!r}")
    if (
        "id" in rec
        and (kind, rec.get("type")) not in SERVICE_QUIRKS
        and id_shape(str(got.get("id"))) != id_shape(rec["id"])
    ):
        diffs.append(f"id shape {id_shape(str(got.get('id')))} != recorded {id_shape(rec['id'])}")
    if "type" in rec and got.get("type") != rec["type"] and (kind, rec["type"]) not in SERVICE_QUIRKS:
        diffs.append(f"type {got.get('type')!r} != recorded {rec['type']!r}")
    if isinstance(rec.get("name"), str):
        want, have = name_shape(rec["name"], FIXED_NAMES), name_shape(str(got.get("name")), FIXED_NAMES)
        if want != have:
            diffs.append(f"name shape {have!r} != recorded {want!r}")
    for key in ("startTime", "location"):
        both = isinstance(rec.get(key), str) and isinstance(got.get(key), str)
        if both and time_shape(rec[key]) != time_shape(got[key]):
            diffs.append(f"{key} form {got[key]!r} != recorded {rec[key]!r}")
    return diffs


_ABSENT = object()


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _ABSENT
        obj = obj[part]
    return obj


def _quirk_value(rec: dict[str, Any], path: tuple[str, ...]) -> bool:
    """A consumption-only environment (workloadProfiles null, 2023) has apps without a profile name;
    the emulator's environments always have workload profiles, where ARM answers "Consumption"."""
    return path == ("properties", "workloadProfileName") and _dig(rec, path) is None


def check_ndjson(rec: dict[str, Any], text: str) -> list[str]:
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    recorded = rec["response_body_ndjson"]
    diffs: list[str] = []
    if [ln["Reason"] for ln in lines[:2]] != [ln["Reason"] for ln in recorded[:2]]:
        diffs.append(f"first lines {[ln.get('Reason') for ln in lines[:2]]}")
    keys = {tuple(ln) for ln in recorded}
    if {tuple(ln) for ln in lines} - keys:
        diffs.append(f"line keys {[list(k) for k in {tuple(ln) for ln in lines} - keys]} != recorded {keys}")
    for mine, theirs in ((lines[:2], recorded[:2]), (lines[2:], recorded[2:])):
        shapes = {time_shape(ln["TimeStamp"]) for ln in mine}
        if shapes - {time_shape(ln["TimeStamp"]) for ln in theirs}:
            diffs.append(f"TimeStamp forms {shapes}")
    if len(lines) > 2 + int(dict(parse_qsl(urlsplit(rec["uri"]).query)).get("tailLines", "20")):
        diffs.append(f"{len(lines)} lines: more than tailLines allows")
    return diffs


# ---- the comparison helpers themselves ---------------------------------------------------------------
def test_id_shape_keeps_keywords_and_their_case() -> None:
    rec = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.App/containerapps/app"
    assert id_shape(rec) == "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.App/containerapps/{}"
    assert id_shape(rec) != id_shape(rec.replace("containerapps", "containerApps"))


def test_name_shape_counts_random_parts() -> None:
    known = {"containerapp-e2e000002"}
    assert name_shape("containerapp-e2e000002--znbtoy3-c7c975bf8-v5v6d", known) == "{}--7-9-5"
    assert name_shape("containerapp-e2e000002--abcdefg", known) != name_shape(
        "containerapp-e2e000002--abc", known
    )


def test_time_shape_ignores_fraction_length_not_zone() -> None:
    assert time_shape("2024-04-16T10:42:43.856493Z") == time_shape("2024-04-16T10:43:49.9864897Z")
    assert time_shape("2024-08-17T10:36:07+00:00") != time_shape("2024-08-17T10:36:07Z")


def test_transient_states_may_be_past_but_not_skipped_to_failure() -> None:
    assert is_later((202, False, None, None, None, None), (204, False, None, None, None, None))
    assert is_later((200, False, "InProgress", None, None, None), (200, False, "Succeeded", None, None, None))
    assert not is_later(
        (200, False, "InProgress", None, None, None), (200, False, "Failed", None, None, None)
    )
    assert not is_later(
        (200, False, None, "Succeeded", None, None), (200, False, None, "InProgress", None, None)
    )
    assert matches(
        (200, False, None, "Succeeded", None, None), (200, False, None, "Succeeded", "Ready", None)
    )


def test_check_pair_reports_a_missing_key_and_a_wrong_header() -> None:
    recorded = {
        "method": "GET",
        "uri": "https://management.azure.com/subscriptions/0/resourceGroups/rg/providers/Microsoft.App/jobs/j",
        "status": 200,
        "response_headers": {"content-type": "application/json"},
        "response_body": {
            "id": "/subscriptions/0/resourceGroups/rg/providers/Microsoft.App/jobs/j",
            "name": "j",
            "type": "Microsoft.App/jobs",
            "properties": {"a": 1, "b": 2},
        },
    }
    body = {
        "id": "/subscriptions/1/resourceGroups/rg/providers/Microsoft.App/jobs/j",
        "name": "j",
        "type": "Microsoft.App/jobs",
        "properties": {"a": 1},
    }
    same = Pair("job.get", recorded, 200, {"content-type": "application/json"}, body, json.dumps(body), "u")
    assert any("missing ['b']" in d for d in check_pair(same))
    extra_header = {"content-type": "application/json", "retry-after": "1"}
    body["properties"]["b"] = 2
    pair = Pair("job.get", recorded, 200, extra_header, body, json.dumps(body), "u")
    assert [d for d in check_pair(pair) if d.startswith("headers")]
    assert check_pair(Pair("job.get", recorded, 200, {"content-type": "x"}, body, "", "u")) == []
