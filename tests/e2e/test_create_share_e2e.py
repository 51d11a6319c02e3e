"""`acagpu run --env lab --mount data:/data --create-share` against `acagpu emulator serve` in a second
shell, through the fault proxy, with the container run for real in Podman.

The first run finds no storage `data` in the warm environment and makes the storage account, the
Azure Files share and the environment storage; it writes a file there, and a second run (without
the flag: everything exists now) reads it back. The account key travels only in the listKeys answer
and the environment storage's PUT: never in acagpu's output, its documents, or another request.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from tests.e2e.serving import serve_behind_proxy
from tests.local.conftest import podman, test_image  # noqa: F401  (fixtures)

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=120)


def _emulator(emu: dict[str, str], method: str, path: str) -> requests.Response:
    return requests.request(
        method,
        f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{emu['ACAGPU_SUBSCRIPTION']}{path}",
        params={"api-version": "2026-09-01"},
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=30,
    )


def test_create_share_makes_it_once_a_second_run_reads_it_and_the_key_stays_hidden(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    with serve_behind_proxy(tmp_path) as (emu, proxy, shell):
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr

        # without the flag a missing storage is refused before anything of the run exists, naming it
        refused = _acagpu(shell, "run", "--env", "lab", "--yes", "--mount", "data:/data", test_image,
                          "--", "true")  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert "has no storage data" in refused.stderr and "--create-share" in refused.stderr

        planned = _acagpu(shell, "run", "--env", "lab", "--dry-run", "-o", "json", "--mount", "data:/data",
                          "--create-share", test_image)  # fmt: skip
        assert planned.returncode == 0, planned.stderr
        plan = json.loads(planned.stdout)["create_share"]
        assert (plan["resource_group"], plan["shares"][0]["name"], plan["sku"]) == (
            "rg-acagpu-env-lab", "data", "Standard_LRS"
        )  # fmt: skip
        account = plan["storage_account"]
        assert account.startswith("acagpulab") and len(account) <= 24 and account.isalnum()

        write = "echo hi > /data/x; echo wrote"
        # 600 emulated minutes: the default 30 are a few wall s at this time scale, which a busy
        # machine's Podman start and stop can outlive
        first = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", "--mount", "data:/data",
                        "--create-share", "--max-minutes", "600", test_image,
                        "--", "sh", "-c", write)  # fmt: skip
        assert first.returncode == 0, first.stderr
        doc = json.loads(first.stdout)
        assert doc["output"]["stdout"] == "wrote\n" and doc["create_share"]["storage_account"] == account
        # what was made, by name (never a key)
        assert doc["shares"] == {
            "account": account,
            "resource_group": "rg-acagpu-env-lab",
            "created": [f"storage account {account}", "file share data", "environment storage data"],
        }
        second = _acagpu(shell, "run", "--env", "lab", "--yes", "--mount", "data:/in", "--create-share",
                         "--max-minutes", "600", test_image,
                         "--", "sh", "-c", "read v < /in/x; echo $v")  # fmt: skip
        assert (second.returncode, second.stdout) == (0, "hi\n"), second.stderr

        group = "/resourceGroups/rg-acagpu-env-lab/providers/Microsoft.Storage/storageAccounts/" + account
        made_account = _emulator(emu, "GET", group)
        assert made_account.status_code == 200, made_account.text
        tags = made_account.json()["tags"]
        assert (tags["acagpu:managed"], tags["acagpu:env"], tags["acagpu:kind"]) == ("true", "lab", "env")
        key = _emulator(emu, "POST", group + "/listKeys").json()["keys"][0]["value"]
        puts = [e["path"].split(account, 1)[1] for e in proxy.traffic
                if e["method"] == "PUT" and "/storageAccounts/" in e["path"]]  # fmt: skip
        assert puts == ["", "/fileServices/default/shares/data"], puts  # made once: the second run found them
        shown = "".join(p.stdout + p.stderr for p in (refused, planned, first, second))
        assert key not in shown
        carriers = [_carrier(e, key) for e in proxy.traffic if key in e["body"] + e["answer"]]
        assert carriers == ["POST listKeys (answer)", "PUT environment storage data"], carriers

        # the share stays with the environment: `env delete` removes its group, and the account with it
        gone = _acagpu(shell, "env", "delete", "lab", "--yes", "-o", "json")
        assert gone.returncode == 0, gone.stderr
        assert _emulator(emu, "GET", group).status_code == 404


def _carrier(entry: dict[str, Any], key: str) -> str:
    """Which exchange carried the key: only listKeys' answer and the storage PUT's body may."""
    path = entry["path"].split("?")[0]
    if entry["method"] == "POST" and path.endswith("/listKeys") and key not in entry["body"]:
        return "POST listKeys (answer)"
    if entry["method"] == "PUT" and "/storages/" in path and key not in entry["answer"]:
        return f"PUT environment storage {path.rsplit('/', 1)[-1]}"
    return f"{entry['method']} {path}"
