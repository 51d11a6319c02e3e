"""Pure parts of the fleet work: the emulator's KQL subset and token bucket, the client's rate gate,
`--notify` messages and scrubbing, `guard install --scope` parsing and admin commands."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aca_gpu.emulator.providers.graph.kql import KqlError, compile_query
from aca_gpu.emulator.throttle import Bucket, operation_of
from aca_gpu.errors import BadInput
from aca_gpu.workflow.base import notify
from aca_gpu.workflow.guard import scope as guard_scope

ROWS: dict[str, list[dict[str, Any]]] = {
    "resourcecontainers": [
        {"id": "/s/a/rg1", "name": "rg1", "type": "microsoft.resources/subscriptions/resourcegroups",
         "tags": {"acagpu:managed": "true"}, "properties": {"provisioningState": "Succeeded"}},
        {"id": "/s/a/rg2", "name": "rg2", "type": "microsoft.resources/subscriptions/resourcegroups",
         "tags": {"acagpu:managed": "TRUE", "acagpu:keep": "true"}, "properties": {}},
        {"id": "/s/b/prod", "name": "prod", "type": "microsoft.resources/subscriptions/resourcegroups",
         "tags": {}, "properties": {}},
        {"id": "/s/a", "name": "sub", "type": "microsoft.resources/subscriptions", "tags": {}},
    ],
    "resources": [
        {"id": "/s/a/rg1/env", "name": "env", "type": "microsoft.app/managedenvironments",
         "tags": {"acagpu:managed": "true"}},
        {"id": "/s/a/rg1/app", "name": "app", "type": "microsoft.app/containerapps", "tags": {}},
    ],
}  # fmt: skip
GROUPS = "resourcecontainers | where type =~ 'Microsoft.Resources/subscriptions/resourceGroups'"


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        (GROUPS + " | project id | order by id asc", ["/s/a/rg1", "/s/a/rg2", "/s/b/prod"]),
        (GROUPS + " and tags['acagpu:managed'] =~ 'true' | order by id asc", ["/s/a/rg1", "/s/a/rg2"]),
        (GROUPS + " and tags['acagpu:managed'] == 'true'", ["/s/a/rg1"]),  # == is case-sensitive
        (  # KQL orders descending unless told
            GROUPS + " and (name == 'prod' or tags['acagpu:keep'] == 'true') | order by id",
            ["/s/b/prod", "/s/a/rg2"],
        ),
        (
            GROUPS + " and tostring(tags['acagpu:keep']) != 'true' | order by id desc",
            ["/s/b/prod", "/s/a/rg1"],
        ),
        ("resources | where type in~ ('Microsoft.App/managedEnvironments', 'x')", ["/s/a/rg1/env"]),
        ("resources | where type !in ('microsoft.app/managedenvironments')", ["/s/a/rg1/app"]),
        ("resourcecontainers | where id startswith '/s/b' | union (resources | where name has 'env')",
         ["/s/b/prod", "/s/a/rg1/env"]),
        (GROUPS + " | order by id asc | take 1", ["/s/a/rg1"]),
        ("resourcecontainers | where properties.provisioningState == 'Succeeded'", ["/s/a/rg1"]),
    ],
)  # fmt: skip
def test_kql_subset(query: str, ids: list[str]) -> None:
    rows = compile_query(query)(lambda table: ROWS[table])
    assert [r["id"] for r in rows] == ids


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("resources | summarize count() by type", "summarize"),
        ("securityresources | take 1", "unknown table"),
        ("resources | where name == 'x", "unexpected character"),
        ("resources | where name", "expected a comparison"),
        ("resources | where name in~ (1)", "string literal"),
        ("resources | project id,", "expected a column"),
        ("resources | join (resources) on id", "join"),
    ],
)
def test_kql_refuses_what_it_does_not_understand(query: str, said: str) -> None:
    with pytest.raises(KqlError) as refused:
        compile_query(query)
    assert said in str(refused.value)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.scale = 0.5

    def now(self) -> float:
        return self.t

    def emulated(self, wall: float) -> float:
        return wall / self.scale


def test_token_bucket_refills_on_the_emulated_clock() -> None:
    clock = FakeClock()
    bucket = Bucket(size=2, refill=10, tokens=1, at=0.0)
    assert bucket.take(clock) is None  # type: ignore[arg-type]
    wait = bucket.take(clock)  # type: ignore[arg-type]
    assert wait == pytest.approx(0.1)  # one token per 0.1 emulated s
    clock.t = 0.05  # 0.1 emulated s at scale 0.5
    assert bucket.take(clock) is None  # type: ignore[arg-type]
    clock.t = 10.0
    bucket.take(clock)  # type: ignore[arg-type]
    assert bucket.tokens == pytest.approx(1.0)  # capped at the bucket's size, less the one taken
    assert [operation_of(m) for m in ("GET", "DELETE", "PUT", "POST")] == [
        "reads",
        "deletes",
        "writes",
        "writes",
    ]


def test_rate_gate_holds_a_subscription_after_a_429_and_when_its_bucket_is_empty() -> None:
    from aca_gpu.azure.ratelimit import RateLimitGate

    now = [100.0]
    slept: list[float] = []
    gate = RateLimitGate(
        clock=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + s))
    )
    gate._observe("deletes", 429, {"retry-after-ms": "1500", "Retry-After": "2"})
    gate._wait_turn("deletes")
    gate._wait_turn("writes")  # another bucket: not held
    assert slept == [pytest.approx(1.5)]
    gate._observe("deletes", 202, {"x-ms-ratelimit-remaining-subscription-deletes": "0"})
    gate._wait_turn("deletes")  # the bucket said empty: wait as long as the last 429 asked
    assert slept[-1] == pytest.approx(1.5)
    limits = gate.limits()
    assert (
        limits.throttled == 1 and limits.remaining == {"deletes": 0} and limits.held_s == pytest.approx(3.0)
    )


def test_notify_messages_carry_text_facts_and_no_secret() -> None:
    token = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiIxMjM0NTY3OCJ9.c2lnbmF0dXJlc2ln"
    doc = {
        "dry_run": False,
        "counts": {"deleted": 1, "failed": 1, "skipped": 3, "would-delete": 0},
        "spend_usd_estimate": 1.5,
        "items": [
            {"subscription": "s1", "resource_group": "rg-acagpu-a", "run_id": "a", "status": "deleted",
             "age_seconds": 7200, "spend_usd_estimate": 1.5, "error": None},
            {"subscription": "s2", "resource_group": "rg-acagpu-b", "run_id": "b", "status": "failed",
             "age_seconds": None, "spend_usd_estimate": None,
             "error": f"delete: 401 Bearer {token} https://x/y?sig=abcdef&se=1 password=hunter2"},
            {"subscription": "s2", "resource_group": "rg-acagpu-c", "status": "skipped"},
        ],
    }  # fmt: skip
    message = notify.reap_message(doc)
    assert message is not None
    assert message["text"].splitlines()[0] == "*acagpu reap: deleted 1, failed 1*"
    assert "`rg-acagpu-a` (2.0h old, ≈$1.50)" in message["text"]
    raw = json.dumps(message)
    assert token not in raw and "abcdef" not in raw and "hunter2" not in raw
    assert [i["resource_group"] for i in message["acagpu"]["items"]] == ["rg-acagpu-a", "rg-acagpu-b"]
    assert notify.reap_message({"counts": {}, "items": [doc["items"][2]]}) is None  # nothing to tell

    pair = {"image": "nvidia/cuda:13.0", "gpu": "t4", "status": "fail", "reason": "driver too old"}
    error = {"code": "GpuCheckFailed", "message": "nvidia/cuda:13.0 on t4: driver too old"}
    run = {
        "command": "validate",
        "run_id": "r1",
        "status": "failed",
        "exit_code": 5,
        "results": [pair],
        "error": error,
    }
    sent = notify.run_message(run)
    assert sent["text"].startswith("*acagpu validate r1: failed (exit 5)*")
    assert sent["acagpu"]["results"][0]["status"] == "fail" and sent["acagpu"]["outcome"] == "failed"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.slack.com/services/T/B/X", True),
        ("https://contoso.webhook.office.com/webhookb2/abc", True),
        ("http://127.0.0.1:8080/hook", True),
        ("http://hooks.slack.com/services/T/B/X", False),
        ("ftp://example.com/x", False),
        ("https:///nohost", False),
    ],
)
def test_notify_urls(url: str, ok: bool) -> None:
    if ok:
        assert notify.check_url(url) == url
        assert notify.where(url) in url and "/" not in notify.where(url)
    else:
        with pytest.raises(BadInput):
            notify.check_url(url)


def test_guard_scopes_and_admin_commands() -> None:
    home, a, b = ("00000000-0000-0000-0000-00000000000" + str(n) for n in (1, 2, 3))
    assert guard_scope.parse_scopes(home, [f"/subscriptions/{a}", b.upper(), f"subscriptions/{home}/"]) == (
        home, a, b.lower(),
    )  # fmt: skip
    for bad in ("/providers/Microsoft.Management/managementGroups/mg", "/subscriptions/x", "rg"):
        with pytest.raises(BadInput):
            guard_scope.parse_scopes(home, [bad])
    missing = {home: [], a: [guard_scope.ASSIGN, guard_scope.DEFINE]}
    lines = guard_scope.admin_commands(missing, ("oid-1", "User"), (home, a))
    assert lines[0].startswith('az role assignment create --role "Role Based Access Control Administrator"')
    assert f"--scope /subscriptions/{a} " in lines[0] and '"oid-1"' in lines[0] and len(lines) == 2
    created = json.loads(lines[1].split("'", 1)[1].rsplit("'", 1)[0])
    assert created["AssignableScopes"] == [f"/subscriptions/{home}", f"/subscriptions/{a}"]
    role = {"name": "r-guid", "properties": {"assignableScopes": [f"/subscriptions/{home}"]}}
    update = guard_scope.admin_commands(missing, (None, None), (home, a), role)[1]
    assert update.startswith("az role definition update") and '"Id":"r-guid"' in update


def test_a_served_apps_phase_agrees_with_the_replicas_status_shows_beside_it() -> None:
    """The phase and the replica count come from two reads; an app that scaled to zero (or woke)
    between them is said as the later read found it."""
    from aca_gpu.workflow.fleet.status import _served_phase

    assert _served_phase("serving", {"replicas": 0}) == "scaled-to-zero"
    assert _served_phase("scaled-to-zero", {"replicas": 1}) == "starting"
    assert _served_phase("serving", {"replicas": 2}) == "serving"
    assert _served_phase("starting", {"replicas": 1}) == "starting"
    assert _served_phase("serving", {"replicas": None}) == "serving"  # the read failed: the first stands
    assert _served_phase("running", None) == "running"  # no served app: untouched
