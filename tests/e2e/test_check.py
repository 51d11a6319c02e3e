"""`acagpu check` over HTTPS against the emulator: identity from the token's claims, quota per region."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.cli import cli
from aca_gpu.config import load_settings


def _check(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, ["check", *args, "-o", "json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_check_reports_who_quota_and_exit_codes(emu: Any) -> None:
    code, doc, err = _check("-l", "eastus", "--gpu", "t4")
    assert code == 2 and doc["provider"]["registered"] is False, err  # nothing is registered by check
    assert doc["status"] == "refused", doc  # every check document carries a status (README)
    assert "az provider register" in doc["error"]["hint"]
    AzureCloud.from_settings(load_settings()).register_provider("Microsoft.App", timeout=30)

    emu.set_faults("quota:region=eastus,profile=A100,limit=0")
    code, doc, err = _check("-l", "eastus", "-l", "westus3", "--gpu", "a100", "--gpu", "t4")
    assert code == 0, err
    assert doc["command"] == "check" and doc["schema"] == 1
    assert doc["identity"]["tenant_id"] and doc["identity"]["object_id"] and "token" not in json.dumps(doc)
    assert doc["subscription"]["state"] == "Enabled"
    rows = {(r["region"], r["gpu"]): r for r in doc["rows"]}
    refused = rows["eastus", "a100"]
    assert refused["can_run"] is False and refused["quota"]["limit"] == 0
    assert refused["quota"]["usage"] == "ManagedEnvironmentConsumptionNCA100Gpus"
    assert rows["westus3", "a100"]["can_run"] and rows["westus3", "a100"]["quota"]["limit"] > 0
    assert rows["eastus", "t4"]["price_per_hour_usd"] > 0 and rows["eastus", "t4"]["driver"]["version"]

    code, doc, err = _check("-l", "eastus", "--gpu", "a100")
    assert code == 3 and "0 of 0 used" in doc["error"]["message"], err
    code, doc, _ = _check("-l", "northeurope", "--gpu", "t4")
    assert code == 2 and doc["error"]["code"] == "ProfileNotOffered"
    assert CliRunner().invoke(cli, ["check", "--gpu", "h100"]).exit_code == 2
    assert emu.inventory()["empty"], "check created something"
