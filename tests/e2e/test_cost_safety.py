"""Cost safety end to end: `reap` and `validate` through the CLI against the emulator over HTTPS."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.models import Cloud
from aca_gpu.naming import run_tags
from aca_gpu.workflow.base.context import open_cloud

SCALE = 0.002
NEW_TAG = "nvidia/cuda:13.0.0-runtime-ubuntu24.04"  # needs a newer driver than the emulated 550 fleet
OLD_TAG = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(time_scale=SCALE) as server:
        yield server


@pytest.fixture
def emu(emulator: EmulatorServer, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> EmulatorServer:
    emulator.reset()
    for key, value in emulator.client_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.1")
    monkeypatch.delenv("ACAGPU_CONFIG", raising=False)
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))
    return emulator


def _cloud(emu: EmulatorServer) -> Cloud:
    env = emu.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}
    return open_cloud(load_settings(env=env, file={}))


def _invoke(*args: str) -> tuple[int, dict[str, object], str]:
    result = CliRunner().invoke(cli, list(args))
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.stderr


def _groups(emu: EmulatorServer) -> set[str]:
    return {g["name"] for g in emu.inventory()["resource_groups"]}


def test_reap_dry_run_then_delete_expired_only(emu: EmulatorServer) -> None:
    code, up_doc, err = _invoke("up", "--ttl", "1s", "--keep", "--run-id", "reapme", "--yes", "-o", "json")
    assert code == 0, err
    assert up_doc["teardown"]["status"] == "kept"  # type: ignore[index]
    cloud = _cloud(emu)
    cloud.create_resource_group("rg-someone-else", "eastus", {"team": "ml"})
    keep_tags = run_tags("keepme", owner="me", ttl=__import__("datetime").timedelta(seconds=1), keep=True)
    cloud.create_resource_group("rg-acagpu-keepme", "eastus", keep_tags)
    time.sleep(1.2)  # both acagpu groups are now past their expiry

    code, doc, err = _invoke("reap", "-o", "json")
    assert code == 0, err
    statuses = {i["resource_group"]: i["status"] for i in doc["items"]}  # type: ignore[attr-defined]
    assert statuses == {"rg-acagpu-reapme": "would-delete", "rg-acagpu-keepme": "skipped"}
    assert _groups(emu) == {"rg-acagpu-reapme", "rg-someone-else", "rg-acagpu-keepme"}  # dry run: all there

    emu.set_faults("429:count=2,retry_after=1,method=DELETE")
    code, doc, err = _invoke("reap", "--yes", "-o", "json")
    assert code == 0, err
    statuses = {i["resource_group"]: i["status"] for i in doc["items"]}  # type: ignore[attr-defined]
    assert statuses["rg-acagpu-reapme"] == "deleted"
    assert _groups(emu) == {"rg-someone-else", "rg-acagpu-keepme"}
    inventory = emu.inventory()
    assert not inventory["apps"] and not inventory["jobs"] and not inventory["environments"]


def test_reap_human_output_says_dry_run(emu: EmulatorServer) -> None:
    result = CliRunner().invoke(cli, ["reap"])
    assert result.exit_code == 0, result.stderr
    assert "would delete: 0" in result.stdout


def test_validate_two_tags_two_gpus(emu: EmulatorServer) -> None:
    code, doc, err = _invoke(
        "validate",
        "--yes",
        "--max-minutes",  # 20 emulated minutes are 2.4 wall s here: a busy machine outlived them
        "600",
        "--image",
        OLD_TAG,
        "--image",
        NEW_TAG,
        "--gpu",
        "t4",
        "--gpu",
        "a100",
        "--no-inspect",
        "--wait",
        "-o",
        "json",
    )
    assert code == 5, err  # one tag fails on both GPUs
    results = {(r["image"], r["gpu"]): r for r in doc["results"]}  # type: ignore[attr-defined]
    assert len(results) == 4
    for gpu in ("t4", "a100"):
        good, bad = results[(OLD_TAG, gpu)], results[(NEW_TAG, gpu)]
        assert good["status"] == "pass", good["reason"]
        assert good["driver_version"] and good["cuda_version"]
        # the per-GPU summary `up` prints reaches validate's results too
        assert good["gpu_lines"] and all("TFLOP/s" in line for line in good["gpu_lines"]), good
        assert bad["status"] == "fail"
        assert "requirement error" in bad["reason"] and "cuda>=13.0" in bad["reason"]
        # with no driver seen yet the prediction uses the bundled 580.159.04 (CUDA 13.0 runs there);
        # the platform's GpuDriverInfo event then names the host's older driver before the container
        predicted = bad["preflight"]
        assert predicted["verdict"] == ("ok" if "bundled" in predicted["driver_source"] else "incompatible")
        assert "GpuDriverInfo" in bad["reason"]
    assert results[(OLD_TAG, "a100")]["bf16_tflops"]
    assert doc["teardown"] == {"status": "deleted", "verified": True, "billing_stopped": True}  # type: ignore[index]
    assert emu.inventory()["empty"]


def test_validate_github_summary_and_merge(
    emu: EmulatorServer, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    out = Path(str(tmp_path))
    summary = out / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = CliRunner().invoke(
        cli,
        [
            "validate",
            "--yes",
            "--image",
            OLD_TAG,
            "--gpu",
            "t4",
            "--no-inspect",
            "--no-tester",
            "--wait",
            "--github",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert f"`{OLD_TAG}`" in summary.read_text(encoding="utf-8")
    (out / "one.json").write_text(result.stdout, encoding="utf-8")
    merged = CliRunner().invoke(cli, ["report", "merge", str(out / "one.json"), "-o", "json"])
    assert merged.exit_code == 0, merged.stderr
    assert json.loads(merged.stdout)["passed"] == 1, merged.stdout
    assert emu.inventory()["empty"]


def test_validate_bad_input_creates_nothing(emu: EmulatorServer) -> None:
    for args in (("--image", "bad image", "--gpu", "t4"), ("--image", OLD_TAG, "--gpu", "h100x")):
        code, _, err = _invoke("validate", *args, "--no-inspect")
        assert code == 2
        assert err.startswith("error:")
    assert emu.inventory()["empty"]


def test_a_kept_dedicated_run_says_its_node_bills(emu: EmulatorServer) -> None:
    """A kept run on a dedicated profile: its explorer is stopped, but the node bills while the
    environment exists. The plan warns, and `status` and `reap` price node time with the same function."""
    from aca_gpu import cost
    from aca_gpu.gpu.profiles import resolve_profile

    code, plan, err = _invoke("up", "--gpu", "nc24-a100", "--keep", "--dry-run", "-o", "json")
    assert code == 0, err
    warnings = plan["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 1 and "its node bills" in warnings[0], plan
    assert "≈$" in warnings[0] and "/h" in warnings[0]
    code, _, err = _invoke(
        "up", "--gpu", "nc24-a100", "-l", "westus3", "--keep", "--run-id", "ded1", "--yes", "-o", "json"
    )
    assert code == 0, err
    time.sleep(1.0)
    code, status, err = _invoke("status", "-o", "json")
    assert code == 0, err
    (run,) = status["runs"]  # type: ignore[misc]
    node_s = run["cost"]["node_seconds"]
    assert node_s is not None and node_s >= 1.0  # the node bills from the run's creation...
    assert node_s >= run["cost"]["gpu_seconds"]  # ...whatever its replicas did
    expected = cost.run_spend(resolve_profile("nc24-a100"), node_s).usd
    assert run["cost"]["usd_estimate"] == pytest.approx(expected, abs=2e-4) and expected > 0
    assert "node time" in run["cost"]["basis"]
    code, reap_doc, err = _invoke("reap", "-o", "json")
    assert code == 0, err
    (item,) = [i for i in reap_doc["items"] if i["resource_group"] == "rg-acagpu-ded1"]  # type: ignore[union-attr,index]
    assert item["spend_usd_estimate"] == pytest.approx(expected, abs=0.02)  # the same node-time figure
    assert _invoke("down", "--run-id", "ded1", "--yes")[0] == 0
