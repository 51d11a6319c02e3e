"""Many subscriptions at once: `status` and `reap --all-subscriptions` through Azure Resource Graph,
seen from a proxy between acagpu and the emulator (5 emulated subscriptions), and `reap --notify`
seen from a webhook receiver."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.graph import managed_groups
from aca_gpu.cli import cli
from aca_gpu.config import load_settings
from aca_gpu.naming import run_tags
from aca_gpu.workflow.fleet.groups import Scope, subscription_ids
from tests.chaos.proxy import ChaosProxy
from tests.e2e.webhook import webhook

GRAPH = "/providers/Microsoft.ResourceGraph/resources"
NOW = datetime.now(UTC)
API = "2025-04-01"


def _seed(emu: Any) -> dict[str, set[str]]:
    """Per subscription: an expired run, a fresh one, an expired kept one and a stranger's group."""
    expected: dict[str, set[str]] = {"expired": set(), "untouched": set()}
    for n, sub in enumerate(emu.subscriptions):
        old = NOW - timedelta(hours=3)
        groups = [
            (
                f"rg-acagpu-old{n}",
                "eastus",
                run_tags(f"old{n}", owner="me", ttl=timedelta(hours=1), now=old, gpu="t4"),
            ),
            (
                f"rg-acagpu-new{n}",
                "westus3",
                run_tags(f"new{n}", owner="me", ttl=timedelta(hours=2), gpu="a100"),
            ),
            (
                f"rg-acagpu-kept{n}",
                "eastus",
                run_tags(f"kept{n}", owner="me", ttl=timedelta(hours=1), now=old, keep=True),
            ),
            (f"rg-prod{n}", "eastus", {"team": "prod", "acagpu:expires-at": "2000-01-01T00:00:00Z"}),
        ]
        emu.seed_groups(sub, groups)
        _register(emu, sub)  # acagpu ran there before: Microsoft.App is registered
        expected["expired"].add(f"{sub}/rg-acagpu-old{n}")
        expected["untouched"] |= {f"{sub}/{g[0]}" for g in groups[1:]}
    return expected


def _register(emu: Any, sub: str) -> None:
    url = f"{emu.endpoint}/subscriptions/{sub}/providers/Microsoft.App"
    auth = {"Authorization": f"Bearer {emu.token}"}
    requests.post(
        f"{url}/register", params={"api-version": API}, headers=auth, verify=emu.ca_bundle, timeout=30
    )
    end = time.monotonic() + 10
    while time.monotonic() < end:
        got = requests.get(url, params={"api-version": API}, headers=auth, verify=emu.ca_bundle, timeout=30)
        if got.json()["registrationState"] == "Registered":
            return
        time.sleep(0.05)
    raise AssertionError(f"Microsoft.App not registered in {sub}")


@pytest.fixture
def proxied(emu: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChaosProxy]:
    with ChaosProxy(emu.endpoint, emu.ca_bundle, workdir=tmp_path) as proxy:
        monkeypatch.setenv("ACAGPU_ARM_ENDPOINT", proxy.endpoint)
        monkeypatch.setenv("ACAGPU_CA_BUNDLE", proxy.ca_bundle)
        yield proxy


def _calls(proxy: ChaosProxy, method: str, fragment: str) -> list[str]:
    return [
        e["path"] for e in proxy.traffic if e["method"] == method and fragment.lower() in e["path"].lower()
    ]


def _groups(emu: Any) -> set[str]:
    return {f"{sub}/{g['name']}" for sub in emu.subscriptions for g in emu.inventory(sub)["resource_groups"]}


def test_status_and_reap_across_five_subscriptions(emu: Any, proxied: ChaosProxy) -> None:
    expected = _seed(emu)
    runner = CliRunner()

    result = runner.invoke(cli, ["status", "--all-subscriptions", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["subscriptions"] == sorted(emu.subscriptions)
    found = {f"{r['subscription']}/{r['resource_group']}" for r in doc["runs"]}
    assert found == {g for g in expected["expired"] | expected["untouched"] if "/rg-prod" not in g}
    assert {r["phase"] for r in doc["runs"]} == {"empty"}
    # one Resource Graph query (one page) for five subscriptions, and no listing per subscription
    assert len(_calls(proxied, "POST", GRAPH)) == 1
    assert [
        e for e in proxied.traffic if e["method"] == "GET" and e["path"].lower().endswith("/resourcegroups")
    ] == []

    emu.set_faults("throttle:op=deletes,burst=1,start=0,refill=200")  # ARM's bucket, drained
    with webhook() as hook:
        result = runner.invoke(
            cli, ["reap", "--all-subscriptions", "--yes", "--notify", hook.url, "-o", "json"]
        )
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        messages = hook.received()
    assert report["counts"] == {"would-delete": 0, "deleted": 5, "skipped": 10, "failed": 0}
    assert {
        f"{i['subscription']}/{i['resource_group']}" for i in report["items"] if i["status"] == "deleted"
    } == expected["expired"]
    assert _groups(emu) == expected["untouched"]  # kept, fresh and a stranger's groups all stay
    assert len(_calls(proxied, "POST", GRAPH)) == 2  # reap found them with one more query
    assert sum(emu.inventory(sub)["throttled"] for sub in emu.subscriptions) > 0  # 429s met, none fatal
    assert report["notification"]["ok"] is True and report["notification"]["host"] == "127.0.0.1"
    assert hook.url not in result.stdout + result.stderr  # the webhook's path is its secret

    assert len(messages) == 1
    message = messages[0]
    assert message["text"].startswith("*acagpu reap: deleted 5, failed 0*")
    facts = message["acagpu"]
    assert facts["kind"] == "reap" and facts["outcome"] == "ok"
    assert {(i["subscription"], i["resource_group"]) for i in facts["items"]} == {
        tuple(g.split("/")) for g in expected["expired"]
    }
    # the seeded groups never ran a replica: $0 so far, the figure `status` shows for them too
    assert all(i["age_seconds"] >= 3 * 3600 - 60 and i["spend_usd_estimate"] == 0 for i in facts["items"])
    assert facts["prices"] == report["prices"] and report["prices"]
    assert emu.token not in json.dumps(message)


def test_graph_pages_and_what_the_emulator_refuses(emu: Any, proxied: ChaosProxy) -> None:
    _seed(emu)
    settings = load_settings()
    clients = Clients(settings, subscription_id="")
    groups = managed_groups(clients, page_size=4)
    assert len(groups) == 15 and len({g.subscription for g in groups}) == 5
    assert len(_calls(proxied, "POST", GRAPH)) == 4  # 15 rows in pages of 4: one query per page
    only = managed_groups(clients, subscriptions=emu.subscriptions[1:3])
    assert {g.subscription for g in only} == set(emu.subscriptions[1:3])
    before = len(_calls(proxied, "POST", GRAPH))
    everything = subscription_ids(settings, Scope(everything=True))  # what `cost --all-subscriptions` asks
    assert everything == sorted(emu.subscriptions) and len(_calls(proxied, "POST", GRAPH)) == before + 1
    assert subscription_ids(settings, Scope()) == [None]  # the configured one

    from azure.core.exceptions import HttpResponseError
    from azure.mgmt.resourcegraph.models import QueryRequest

    with pytest.raises(HttpResponseError) as refused:
        clients.graph.resources(QueryRequest(query="resources | summarize count() by type"))
    assert refused.value.status_code == 400
    assert "InvalidQuery" in str(refused.value) and "summarize" in str(refused.value)


def test_fleet_flags_refuse_bad_input(emu: Any) -> None:
    runner = CliRunner()
    sub = emu.subscriptions[1]
    both = runner.invoke(cli, ["status", "--all-subscriptions", "--subscription", sub])
    assert both.exit_code == 2 and "exclude each other" in both.stderr
    plain = runner.invoke(cli, ["reap", "--notify", "http://hooks.example.com/x"])
    assert plain.exit_code == 2 and "https" in plain.stderr
    assert "Traceback" not in both.stderr + plain.stderr
