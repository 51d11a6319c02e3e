"""The fields acagpu reads, compared value by value between a recorded answer and the emulator's.

test_replay_compare.check_pair compares shapes (status, headers, key sets, id/name/time forms); this
adds the values the client acts on: where an app or job says its environment is, which workload
profiles an environment has, what a GET says about secrets, the defaults Azure fills in, an
execution's container codes while it runs, and the first lines of a log stream. Recorded names are
mapped to the emulator's (subscription, learned random names) before comparing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from tests.emulator.test_replay_compare import Pair

_MISSING = "<absent>"

# (kinds, path, how): "value" equal after mapping (ids case-insensitively), "recorded" likewise but
# only where the recording has the field (an older api-version's answer lacks it), "present" both
# have a non-empty value or neither does. `[]` fans out over a list.
READ_FIELDS: list[tuple[tuple[str, ...], str, str]] = [
    (("app.get", "app.put", "app.list"), "properties.environmentId", "value"),
    (("app.get", "app.put", "app.list"), "properties.managedEnvironmentId", "value"),
    (("app.get", "app.put", "app.list"), "properties.workloadProfileName", "value"),
    (("app.get", "app.list"), "properties.latestReadyRevisionName", "present"),
    (("app.get", "app.put", "app.list"), "properties.eventStreamEndpoint", "present"),
    (("app.get", "app.list"), "properties.template.scale.cooldownPeriod", "value"),
    (("app.get", "app.list"), "properties.template.scale.pollingInterval", "value"),
    (("app.get", "app.list"), "properties.configuration.ingress.traffic", "present"),
    (("app.get", "app.list"), "properties.configuration.secrets[].value", "value"),
    (("job.get", "job.put", "job.list", "job-op.result"), "properties.environmentId", "value"),
    (("job.get", "job.list", "job-op.result"), "properties.eventStreamEndpoint", "present"),
    (("job.get", "job.list"), "properties.configuration.secrets[].name", "value"),
    (("job.get", "job.list", "job.put"), "properties.configuration.secrets[].value", "value"),
    (("job.get", "job.list"), "properties.template.containers[].resources.memory", "value"),
    (("job.get", "job.list"), "properties.template.containers[].resources.ephemeralStorage", "value"),
    (("job.secrets",), "value[].name", "value"),
    (("env.get", "env.put"), "properties.workloadProfiles", "present"),
    (("env.get", "env.put"), "properties.environmentMode", "value"),
    (("env.get",), "properties.publicNetworkAccess", "value"),
    (("env.get",), "properties.infrastructureResourceGroup", "present"),
    (("executions.list",), "value[].properties.status", "value"),
    (("executions.list",), "value[].properties.detailedStatus.replicas[].containers[].code", "recorded"),
    (("execution.get",), "properties.detailedStatus.replicas[].containers[].code", "recorded"),
    (("replicas.list", "execution.replicas"), "value[].properties.containers[].logStreamEndpoint", "present"),
]


def _walk(obj: Any, parts: list[str]) -> Iterator[Any]:
    if not parts:
        yield obj
        return
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = obj.get(head[:-2]) if isinstance(obj, dict) else None
        for item in items if isinstance(items, list) else []:
            yield from _walk(item, rest)
        return
    if isinstance(obj, dict) and head in obj:
        yield from _walk(obj[head], rest)
    else:
        yield _MISSING


def values(obj: Any, path: str) -> list[Any]:
    return list(_walk(obj, path.split(".")))


def _empty(value: Any) -> bool:
    return value in (_MISSING, None, "", [], {})


def check_fields(pair: Pair, mapped: Callable[[Any], Any]) -> list[str]:
    """Differences in the fields acagpu reads; `mapped` turns a recorded value into the emulator's."""
    if pair.ahead or not isinstance(pair.recorded["response_body"], dict) or not isinstance(pair.body, dict):
        return []
    diffs: list[str] = []
    for kinds, path, how in READ_FIELDS:
        if pair.kind not in kinds:
            continue
        want = [mapped(v) for v in values(pair.recorded["response_body"], path)]
        have = values(pair.body, path)
        if how == "present":
            if [_empty(v) for v in want] != [_empty(v) for v in have][: len(want)] or (
                not want and have and not all(_empty(v) for v in have)
            ):
                diffs.append(f"{path} present {[not _empty(v) for v in have]} != recorded {want}")
        elif how == "recorded" and all(v == _MISSING for v in want):
            continue
        elif _norm(want) != _norm(have):
            diffs.append(f"{path} {have} != recorded {want}")
    return diffs


def _norm(items: list[Any]) -> list[Any]:
    """Resource ids compare case-insensitively (ARM's own rule); an absent key and null are alike."""
    out: list[Any] = []
    for item in items:
        if item is None:
            item = _MISSING
        if isinstance(item, str) and item.startswith("/subscriptions/"):
            item = item.lower()
        out.append(item)
    return out


def check_log_lines(pair: Pair) -> list[str]:
    """A log stream opens with "Connecting to the container" and "Successfully Connected" lines."""
    if not pair.kind.startswith("logstream") or pair.status != 200:
        return []
    recorded = [json.loads(ln) for ln in str(pair.recorded["response_body"]).splitlines() if ln.strip()]
    lines = []
    for ln in pair.text.splitlines():
        try:
            lines.append(json.loads(ln))
        except ValueError:
            lines.append({"Log": ln})
    want = [str(ln.get("Log", "")).split(" ")[0] for ln in recorded[:2]]
    have = [str(ln.get("Log", "")).split(" ")[0] for ln in lines[:2]]
    return [] if want == have else [f"log stream opens with {have} != recorded {want}"]
