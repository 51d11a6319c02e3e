"""Queue mode with real processes: `acagpu emulator serve --storage azurite` in a second shell,
Azurite (Microsoft's Storage emulator) holding the queues, and `acagpu run --map --workers` here.

20 items, 6 workers asked where the GPU quota allows 4 (clamped), item 7's command fails every
time: the Event job's KEDA poller starts the workers, each a real worker process (the injected
script) running the real `sh -c` command per item; item 7 goes to the poison queue after 3
deliveries, the run exits 1 naming it, every other item's result is in the document in item
order, and afterwards no job, execution or queue of the run is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from aca_gpu.emulator.azurite import find_azurite
from tests.e2e.serving import background_server, emulator_get

ACAGPU = [sys.executable, "-m", "aca_gpu"]
COMMAND = 'echo "item $ACAGPU_ITEM_INDEX: $ACAGPU_ITEM $QTOKEN"; [ "$ACAGPU_ITEM" != bad ]'
SECRET = "q-secret-4f1c9e"  # a --secret-env value: each item prints it, the document must hide it


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _queues_left(emu: dict[str, str], group: str, account: str) -> list[str]:
    """The account's queues, listed with the Azure SDK as any client would (key from listKeys)."""
    from azure.storage.queue import QueueServiceClient

    base = f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}/resourceGroups/{group}"
    url = f"{base}/providers/Microsoft.Storage/storageAccounts/{account}"
    auth = {"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"}
    keys = requests.post(f"{url}/listKeys", params={"api-version": "2023-05-01"}, headers=auth,
                         verify=emu["ACAGPU_CA_BUNDLE"], timeout=30).json()  # fmt: skip
    props = requests.get(url, params={"api-version": "2023-05-01"}, headers=auth,
                         verify=emu["ACAGPU_CA_BUNDLE"], timeout=30).json()  # fmt: skip
    service = QueueServiceClient(
        props["properties"]["primaryEndpoints"]["queue"].rstrip("/"),
        credential={"account_name": account, "account_key": keys["keys"][0]["value"]},
        connection_verify=emu["ACAGPU_CA_BUNDLE"],
    )
    return [q.name for q in service.list_queues()]


@pytest.fixture
def azurite() -> str:
    found = find_azurite()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Azurite is not installed; `make test-tools` installs it with npm")
        pytest.skip("Azurite is not installed (`make test-tools` installs it with npm)")
    return found


def test_twenty_items_workers_clamped_to_the_quota_one_poisoned_results_in_order_nothing_left(
    tmp_path: Path, azurite: str
) -> None:
    serve = ["emulator", "serve", "--time-scale", "0.002", "--storage", "azurite"]
    # the sandbox runs the worker and the command for real (no Podman image needed)
    server_env = os.environ | {"ACAGPU_EMULATOR_CONTAINERS": "off"}
    with background_server(serve, tmp_path / "emu.env", env=server_env) as (emu, _server):
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.05", "QTOKEN": SECRET}
        shell.pop("ACAGPU_ENV", None)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        items = tmp_path / "items.txt"
        items.write_text("".join("bad\n" if k == 7 else f"ok-{k}\n" for k in range(20)))

        # 6 workers asked of an environment of 4 T4 GPUs: clamped to 4, as a fan-out's --parallel is
        done = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--map", str(items), "--workers",
                       "6", "--secret-env", "QTOKEN", "busybox", "--", "sh", "-c", COMMAND)  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert SECRET not in done.stdout + done.stderr  # items' outputs held it before
        doc = json.loads(done.stdout)  # exactly one document
        assert doc["mode"] == "queue" and doc["status"] == "items_failed"
        assert doc["error"]["code"] == "ItemsFailed" and doc["error"]["message"].endswith(": 7")
        assert [i["index"] for i in doc["items"]] == list(range(20))
        for item in doc["items"]:
            if item["index"] == 7:
                assert (item["status"], item["exit_code"], item["deliveries"]) == ("poisoned", 1, 3)
                continue
            k = item["index"]
            assert (item["status"], item["exit_code"], item["output"]) == (
                "succeeded",
                0,
                f"item {k}: ok-{k} ***\n",
            )
        summary = doc["summary"]
        assert (summary["succeeded"], summary["poisoned"], summary["failed_indexes"]) == (19, 1, [7])
        assert 1 <= summary["workers_started"] <= 4 and summary["duplicate_successes"] == 0
        assert doc["queue"]["workers"] == 4 and doc["workers_quota"]["asked"] == 6, doc["workers_quota"]
        assert doc["cost"]["replica_seconds"] > 0 and doc["teardown"]["billing_stopped"] is True

        inventory = emulator_get(emu, "inventory")
        assert inventory["jobs"] == [] and inventory["executions"] == []
        assert _queues_left(emu, "rg-acagpu-env-lab", doc["storage_account"]) == []
