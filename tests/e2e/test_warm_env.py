"""Warm environments against `acagpu emulator serve` in a second shell: real processes throughout.

`env create` → two `up --env` at the same time → both pass with their own results → the environment
holds no replica, app or job of either run and lists idle at $0/h → `env delete --yes` leaves nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aca_gpu.resources import template_path
from tests.e2e.serving import emulator_get, emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _guard_script() -> ModuleType:
    path = template_path("guard", "acagpu_guard.py")
    spec = importlib.util.spec_from_file_location("acagpu_guard_warm", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GUARD = _guard_script()


def _run(shell: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _control(emu: dict[str, str], name: str) -> dict[str, Any]:
    return emulator_get(emu, name)


@pytest.mark.slow(22)
def test_two_runs_share_a_warm_environment_and_leave_it_idle(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", time_scale=None) as emu:  # the server's own default speed
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        shell.pop("ACAGPU_ENV", None)

        refused = _run(shell, "up", "--env", "nowhere", "--yes", "-o", "json")
        assert refused.returncode == 2, refused.stderr  # no such environment: nothing was created
        assert "acagpu env create nowhere" in json.loads(refused.stdout)["error"]["hint"]

        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        created = json.loads(made.stdout)
        assert created["state"] == "idle"
        assert {"name": "gpu-t4", "type": "Consumption-GPU-NC8as-T4"} in created["profiles"]

        runs = [
            subprocess.Popen(
                [*ACAGPU, "up", "--env", "lab", "--run-id", rid, "--yes", "-o", "json"],
                env=shell,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rid in ("warma", "warmb")
        ]
        docs = []
        for proc in runs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            docs.append(json.loads(out))
        for rid, doc in zip(("warma", "warmb"), docs, strict=True):
            assert doc["run_id"] == rid and doc["status"] == "ok"
            assert doc["resources"]["probe_job"] == f"cuda-probe-{rid}"
            assert doc["resources"]["resource_group"] == f"rg-acagpu-{rid}"  # the run's own group
            assert doc["resources"]["environment_group"] == "rg-acagpu-env-lab"
            assert doc["explorer"]["driver_version"] and doc["explorer"]["gpus"]
            assert doc["tester"]["status"] == "pass" and doc["tester"]["result"]["gpu_name"]
            assert doc["teardown"]["status"] == "deleting" and doc["teardown"]["billing_stopped"] is True
            # where the time went, in the platform's own words (its system events), per container
            platform = doc["results"][0]["platform"]
            assert platform["probe"]["image_pull"]["image"] == doc["explorer"]["image"]
            assert platform["tester"]["image_pull"]["image"] == doc["tester"]["image"]
            for container in ("probe", "tester"):
                assert platform[container]["image_pull"]["seconds"] > 0, platform
                assert {"scheduling_s", "container_start_s"} <= set(platform[container]), platform
            assert "run_s" in platform["tester"], platform  # its execution ended before the verdict
        billed = _control(emu, "billing")["runs"]
        # probe + tester; a probe whose lines were lost (a loaded machine) is started once more
        assert billed["warma"]["replicas"] in (2, 3) and billed["warmb"]["replicas"] in (2, 3)
        # priced where the environment is, though each run's jobs sit in a group of their own
        rows = [r for r in _control(emu, "billing")["replicas"] if r["run_id"] in ("warma", "warmb")]
        assert rows and all(r["location"] for r in rows), rows

        inventory = _control(emu, "inventory")
        assert inventory["apps"] == [] and inventory["replicas"] == []  # billing stopped on return
        assert [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]
        deadline = time.monotonic() + 30  # the runs' jobs and groups: deleting, not the environment's
        while (found := _control(emu, "inventory"))["jobs"] or [
            g["name"] for g in found["resource_groups"]
        ] != ["rg-acagpu-env-lab"]:
            assert time.monotonic() < deadline, (found["jobs"], found["resource_groups"])
            time.sleep(0.1)

        listed = _run(shell, "env", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        (lab,) = json.loads(listed.stdout)["environments"]
        assert lab["state"] == "idle" and lab["runs"] == [] and lab["replicas_running"] == 0
        assert lab["idle_cost"]["usd_per_hour"] == 0.0 and "serverless-only" in lab["idle_cost"]["basis"]
        assert lab["last_used"] >= created["last_used"]

        gone = _run(shell, "env", "delete", "lab", "--yes", "-o", "json")
        assert gone.returncode == 0, gone.stderr
        assert json.loads(gone.stdout)["teardown"]["billing_stopped"] is True
        deadline = time.monotonic() + 30  # the environment's delete: minutes on Azure, ~1 s here
        while not _control(emu, "inventory")["empty"]:
            assert time.monotonic() < deadline, _control(emu, "inventory")
            time.sleep(0.1)


def test_reap_and_guard_remove_an_idle_expired_environment_never_one_with_a_run_inside(
    emu: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from click.testing import CliRunner

    from aca_gpu.cli import cli
    from aca_gpu.config import load_settings
    from aca_gpu.models import ContainerDef, JobSpec
    from aca_gpu.naming import run_tags
    from aca_gpu.workflow.base.context import open_cloud

    def acagpu(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, [*args, "-o", "json"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    for name in ("idle", "busy"):
        acagpu("env", "create", name, "--idle-ttl", "1s", "--yes")
    cloud = open_cloud(load_settings())
    busy = cloud.get_environment("rg-acagpu-env-busy", "cae-acagpu-env-busy")
    assert busy is not None
    container = ContainerDef("work", "busybox", 0.5, "1Gi", command=("sleep", "3600"))
    spec = JobSpec("rg-acagpu-env-busy", "work-inside", "eastus", busy.id, "Consumption", container, {})
    cloud.create_job(replace(spec, tags=run_tags("inside", owner="t", ttl=timedelta(hours=1))))
    time.sleep(1.1)  # both 1 s idle TTLs pass

    seen = acagpu("status")
    assert seen["runs"] == []  # a warm environment is no run (and `down` never picks one)
    assert {e["name"]: e["state"] for e in seen["environments"]["warm"]} == {"busy": "busy", "idle": "idle"}

    planned = {i["resource_group"]: i for i in acagpu("reap")["items"]}
    assert planned["rg-acagpu-env-idle"]["status"] == "would-delete"
    assert planned["rg-acagpu-env-idle"]["kind"] == "env"
    assert planned["rg-acagpu-env-busy"]["status"] == "skipped"
    assert "run inside: inside" in planned["rg-acagpu-env-busy"]["reason"]

    # the guard's own copy of the rules, swept for real over HTTPS (only its token is the emulator's)
    monkeypatch.setattr(GUARD, "identity_token", lambda env: env["ACAGPU_TOKEN"])
    monkeypatch.setenv("SSL_CERT_FILE", os.environ["ACAGPU_CA_BUNDLE"])  # as its container has it
    shell = dict(os.environ) | {"ACAGPU_GUARD_DRY_RUN": "true"}
    assert GUARD.sweep(shell) == 0
    events = [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    swept = {e["group"]: e for e in events if e.get("event") == "decision"}
    assert swept["rg-acagpu-env-idle"]["status"] == "would-delete"
    assert swept["rg-acagpu-env-busy"]["status"] == "skipped"
    assert "run inside: inside" in swept["rg-acagpu-env-busy"]["reason"]

    done = {i["resource_group"]: i["status"] for i in acagpu("reap", "--yes")["items"]}
    assert done == {"rg-acagpu-env-idle": "deleted", "rg-acagpu-env-busy": "skipped"}
    assert {g["name"] for g in emu.inventory()["resource_groups"]} == {"rg-acagpu-env-busy"}
    assert [j["name"] for j in emu.inventory()["jobs"]] == ["work-inside"]

    refused = CliRunner().invoke(cli, ["env", "delete", "busy", "--yes", "-o", "json"])
    assert refused.exit_code == 2 and "run(s) inside: inside" in refused.stderr
    assert [j["name"] for j in emu.inventory()["jobs"]] == ["work-inside"]  # nothing was touched
    forced = acagpu("env", "delete", "busy", "--yes", "--force")
    assert forced["runs_removed"] == ["inside"] and forced["teardown"]["billing_stopped"] is True
    assert emu.inventory()["jobs"] == []


def test_env_create_and_delete_are_refused_without_yes_when_nobody_can_confirm(emu: Any) -> None:
    from click.testing import CliRunner

    from aca_gpu.cli import cli

    def groups() -> set[str]:
        return {g["name"] for g in emu.inventory()["resource_groups"]}

    made = CliRunner().invoke(cli, ["env", "create", "lab", "-o", "json"])  # stdin: no terminal
    assert made.exit_code == 2 and "without --yes" in made.stderr, made.stderr
    assert json.loads(made.stdout)["error"]["exit_code"] == 2
    assert emu.inventory()["empty"]  # nothing was created

    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes"]).exit_code == 0
    gone = CliRunner().invoke(cli, ["env", "delete", "lab", "-o", "json"])
    assert gone.exit_code == 2 and "not deleting environment lab without --yes" in gone.stderr
    assert groups() == {"rg-acagpu-env-lab"}  # nothing was deleted
    assert [e["name"] for e in emu.inventory()["environments"]] == ["cae-acagpu-env-lab"]


def test_an_expired_environment_a_run_borrows_from_its_own_group_is_not_removed(
    emu: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The usual warm layout: the run's jobs live in rg-acagpu-<run> (tagged acagpu:env=<name>), the
    environment's own group holds no app or job. Reap and the guard still see the run inside."""
    from click.testing import CliRunner

    from aca_gpu.cli import cli
    from aca_gpu.config import load_settings
    from aca_gpu.models import ContainerDef, JobSpec
    from aca_gpu.naming import TAG_ENV, run_tags
    from aca_gpu.workflow.base.context import open_cloud

    def acagpu(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, [*args, "-o", "json"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    acagpu("env", "create", "lab", "--idle-ttl", "1s", "--yes")
    cloud = open_cloud(load_settings())
    lab = cloud.get_environment("rg-acagpu-env-lab", "cae-acagpu-env-lab")
    assert lab is not None
    tags = {**run_tags("borrow", owner="t", ttl=timedelta(hours=1)), TAG_ENV: "lab"}
    cloud.create_resource_group("rg-acagpu-borrow", "eastus", tags)
    container = ContainerDef("work", "busybox", 0.5, "1Gi", command=("sleep", "3600"))
    spec = JobSpec("rg-acagpu-borrow", "gpu-tester-borrow", "eastus", lab.id, "Consumption", container, tags)
    cloud.create_job(spec)
    assert cloud.list_jobs("rg-acagpu-env-lab") == []  # nothing in the environment's own group
    time.sleep(1.1)  # the idle TTL passes

    planned = {i["resource_group"]: i for i in acagpu("reap")["items"]}
    assert planned["rg-acagpu-env-lab"]["status"] == "skipped", planned
    assert "run inside: borrow" in planned["rg-acagpu-env-lab"]["reason"]

    monkeypatch.setattr(GUARD, "identity_token", lambda env: env["ACAGPU_TOKEN"])
    monkeypatch.setenv("SSL_CERT_FILE", os.environ["ACAGPU_CA_BUNDLE"])
    capsys.readouterr()
    assert GUARD.sweep(dict(os.environ) | {"ACAGPU_GUARD_DRY_RUN": "true"}) == 0
    events = [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    swept = {e["group"]: e for e in events if e.get("event") == "decision"}
    assert swept["rg-acagpu-env-lab"]["status"] == "skipped", swept
    assert "run inside: borrow" in swept["rg-acagpu-env-lab"]["reason"]

    done = {i["resource_group"]: i["status"] for i in acagpu("reap", "--yes")["items"]}
    assert done["rg-acagpu-env-lab"] == "skipped", done
    inventory = emu.inventory()
    assert {g["name"] for g in inventory["resource_groups"]} == {"rg-acagpu-env-lab", "rg-acagpu-borrow"}
    assert [e["name"] for e in inventory["environments"]] == ["cae-acagpu-env-lab"]
    assert [j["name"] for j in inventory["jobs"]] == ["gpu-tester-borrow"]

    # the run ends (its group goes): now the expired environment is idle, and reap removes it
    acagpu("down", "--run-id", "borrow", "--yes")
    done = {i["resource_group"]: i["status"] for i in acagpu("reap", "--yes")["items"]}
    assert done == {"rg-acagpu-env-lab": "deleted"}, done


def test_a_warm_run_says_where_its_time_went(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At Azure's durations the kubelet names each image's size: `up` prints every container's
    scheduling, pull (size, MB/s), start and run; `validate` each pair's; the matrix each image's
    pull and its region."""
    from click.testing import CliRunner

    from aca_gpu.cli import cli
    from aca_gpu.emulator.server import EmulatorServer
    from aca_gpu.workflow.tester.render import render_validate

    server = EmulatorServer(time_scale=0.002, workload="simulated", durations="aca-2026")
    server.start()
    try:
        for key, value in server.client_env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.1")
        for key in ("ACAGPU_CONFIG", "ACAGPU_ENV", "GITHUB_ACTIONS"):
            monkeypatch.delenv(key, raising=False)

        def acagpu(*args: str) -> str:
            result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
            assert result.exit_code == 0, result.stderr
            return result.stdout

        acagpu("env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        # 20-30 emulated minutes are 2.4-3.6 wall s at 0.002: a busy machine outlived them (the
        # tester was "never placed before its deadline"); the figures read do not depend on them
        lines = acagpu("up", "--env", "lab", "--yes", "--max-minutes", "600").splitlines()
        probe = next(line for line in lines if line.startswith(f"  {'probe':<15}"))
        tester = next(line for line in lines if line.startswith(f"  {'tester':<15}"))
        for line in (probe, tester):  # nvidia/cuda base ~0.12 GB, PyTorch ~3.3 GB, from Docker Hub
            assert "scheduling " in line and ", start " in line and ", run " in line, line
        assert " pull " in probe and "(120 MB, 16.6 MB/s)" in probe, probe  # the default probe: base
        assert "(3.3 GB, 22.7 MB/s)" in tester, tester
        phases = next(line for line in lines if line.startswith("  phases "))
        assert "probe image pull" not in phases  # the pair's figures are on their own lines

        images = ["nvidia/cuda:12.4.1-runtime-ubuntu22.04", "nvidia/cuda:12.2.2-base-ubuntu22.04"]
        picks = [arg for image in images for arg in ("--image", image)]
        out = acagpu(
            "validate", "--env", "lab", "--gpu", "t4", *picks, "--no-inspect", "--yes",
            "--max-minutes", "600", "-o", "json",
        )  # fmt: skip
        doc = json.loads(out)
        text = render_validate(doc).splitlines()  # what `validate` prints without -o json
        for image in images:
            at = text.index(f"{image} on t4:")
            below = text[at + 1 :]
            assert any(line.startswith("  probe    scheduling") and " pull " in line for line in below), text
        (tmp_path / "validate.json").write_text(out, encoding="utf-8")
        markdown = tmp_path / "matrix.md"
        acagpu("report", "merge", str(tmp_path / "validate.json"), "--markdown", str(markdown))
        rows = [line for line in markdown.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
        assert len(rows) == 2 and all(" MB/s) pulled from docker.io in eastus |" in row for row in rows), rows
        assert any("<br>pull " in row and "1.6 GB" in row for row in rows), rows
    finally:
        server.stop()
