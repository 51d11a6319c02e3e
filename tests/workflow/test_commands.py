"""The run commands through Click: one JSON document, exit codes, and bad input that never reaches Azure."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

import pytest
from click.testing import CliRunner

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.cli import cli
from tests.workflow.fakecloud import FakeCloud, autospec_cloud
from tests.workflow.test_up import UP_KEYS


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCloud:
    state = FakeCloud()
    cloud = autospec_cloud(state)
    factory = MagicMock(return_value=cloud)
    monkeypatch.setattr(AzureCloud, "from_settings", factory)
    monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.1")
    monkeypatch.delenv("ACAGPU_CONFIG", raising=False)
    state.factory = factory  # type: ignore[attr-defined]
    return state


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_up_json_is_exactly_one_document(fake: FakeCloud) -> None:
    code, out, err = _run("up", "--yes", "--run-id", "r1", "--start-timeout", "5s", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)  # the whole stdout is one document
    assert set(doc) == UP_KEYS
    assert doc["teardown"]["billing_stopped"] is True and doc["teardown"]["status"] == "deleting"
    assert not fake.groups


def test_up_keep_then_down_removes_everything(fake: FakeCloud) -> None:
    code, out, err = _run("up", "--run-id", "r2", "--keep", "--yes")
    assert code == 0, err
    assert "acagpu down --run-id r2" in out
    assert "rg-acagpu-r2" in fake.groups
    code, out, err = _run("down", "--run-id", "r2", "--yes", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}
    assert isinstance(doc["age_seconds"], int), doc  # whole seconds, as `status` says it (not 73.622809)
    assert not fake.groups


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu", "h100x"],
        ["--location", "East US 2!"],
        ["--ttl", "soon"],
        ["--run-id", "abcdefghijklmnop"],
        ["--max-minutes", "0"],
        ["--tester-image", "has space"],
    ],
)
def test_bad_flags_exit_2_without_any_cloud(fake: FakeCloud, args: list[str]) -> None:
    code, out, err = _run("up", *args, "--yes")
    assert code == 2
    assert out == ""
    assert fake.factory.call_count == 0  # type: ignore[attr-defined]
    assert len([line for line in err.splitlines() if line.startswith("error")]) <= 1


def test_dry_run_prints_the_plan_and_creates_nothing(fake: FakeCloud) -> None:
    code, out, _ = _run("up", "--dry-run", "--run-id", "p1", "--gpu", "a100", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "planned"
    assert doc["resources"]["resource_group"] == "rg-acagpu-p1"
    assert doc["profile"]["type"] == "Consumption-GPU-NC24-A100"
    assert doc["tags"]["acagpu:managed"] == "true"
    assert fake.factory.call_count == 0  # type: ignore[attr-defined]


def test_exec_propagates_the_remote_exit_code(fake: FakeCloud) -> None:
    _run("up", "--run-id", "e1", "--keep", "--yes")
    fake.exec_exit = 3
    code, out, _ = _run("exec", "--run-id", "e1", "--", "sh", "-c", "exit 3")
    assert code == 3
    assert "hello" in out


def test_down_refuses_an_untagged_group(fake: FakeCloud) -> None:
    fake.create_resource_group("rg-prod", "eastus", {"team": "prod"})
    code, _, err = _run("down", "-g", "rg-prod", "--yes")
    assert code == 2
    assert "not tagged" in err
    assert "rg-prod" in fake.groups


def test_status_logs_and_test_on_a_kept_run(fake: FakeCloud) -> None:
    _run("up", "--run-id", "s1", "--keep", "--yes")
    code, out, _ = _run("status", "-o", "json")
    assert code == 0
    runs = json.loads(out)["runs"]
    assert [r["run_id"] for r in runs] == ["s1"]
    assert runs[0]["phase"] == "stopped"
    code, out, err = _run("logs", "--run-id", "s1", "--tester")
    assert code == 2 and out == "" and "ended" in err  # a finished execution has no log stream
    code, out, _ = _run("test", "--run-id", "s1", "-o", "json")
    assert code == 0 and json.loads(out)["tester"]["result"]["status"] == "pass"
    fake.tester_doc = {"status": "fail", "reason": "no-cuda"}
    code, out, _ = _run("test", "--run-id", "s1", "-o", "json")
    assert code == 5 and json.loads(out)["status"] == "gpu_check_failed"


def test_smi_live_parses_the_explorers_nvidia_smi(fake: FakeCloud) -> None:
    _run("up", "--run-id", "m1", "--keep", "--yes")
    code, out, _ = _run("smi", "--run-id", "m1", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["run_id"], doc["source"], doc["driver_version"]) == ("m1", "live", "535.54.03")
    assert "NVIDIA-SMI 535.54.03" in doc["raw"]
    fake.smi_text = "Failed to initialize NVML: Driver/library version mismatch\n"
    code, out, _ = _run("smi", "--run-id", "m1", "-o", "json")
    assert code == 5 and json.loads(out)["error"]


def test_profiles_live_joins_the_regions_offer_with_the_catalog(fake: FakeCloud) -> None:
    code, out, _ = _run("profiles", "-l", "westus3", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["location"] == "westus3"
    rows = {r["type"]: r for r in doc["profiles"]}
    assert "Consumption" not in rows
    assert rows["Consumption-GPU-NC8as-T4"]["catalog"]["gpu"] == "Tesla T4"
    code, _, _ = _run("profiles", "-l", "not a region!")
    assert code == 2
