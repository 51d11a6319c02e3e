"""Staged images and the platform's driver with real processes: `acagpu emulator serve` in one
process, the CLI as separate ones (aca-2026 durations, no image cache).

- `env create lab`, `image stage pytorch/pytorch:… --env lab`, then `up --env lab` pulls the tester
  image from the staged copy by tag (the JSON document names the registry and the MB/s), and
  `env delete lab` takes the registry with the environment's group.
- A host whose `GpuDriverInfo` event names a driver older than the image's CUDA ends the run with
  exit 5 before the probe's container starts, naming the driver and where it came from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from tests.e2e.serving import emulator_serve

ACAGPU = [sys.executable, "-m", "aca_gpu"]
TORCH = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"


def _run(shell: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=timeout)


def _doc(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _pulls(doc: Any) -> list[dict[str, Any]]:
    """Every image_pull the document holds, wherever a pair keeps its platform phases."""
    found: list[dict[str, Any]] = []
    if isinstance(doc, dict):
        if isinstance(doc.get("image_pull"), dict):
            found.append(doc["image_pull"])
        for value in doc.values():
            found += _pulls(value)
    elif isinstance(doc, list):
        for value in doc:
            found += _pulls(value)
    return found


def _arm_get(emu: dict[str, str], path: str, version: str) -> requests.Response:
    return requests.get(
        f"{emu['ACAGPU_ARM_ENDPOINT']}{path}",
        params={"api-version": version},
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=10,
    )


def test_a_staged_image_is_pulled_by_tag_from_the_environment_s_registry(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env", extra=("--durations", "aca-2026")) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr

        staged = _run(shell, "image", "stage", TORCH, "--env", "lab", "--no-inspect", "--yes", "-o", "json")
        assert staged.returncode == 0, staged.stderr
        stage = _doc(staged)
        server = stage["login_server"]
        assert server.endswith(".azurecr.io")
        assert stage["created"] == [f"registry {stage['registry']} (Standard)"]
        assert [i["staged_as"] for i in stage["images"]] == [f"{server}/{TORCH}"]
        again = _run(shell, "image", "stage", TORCH, "--env", "lab", "--no-inspect", "--yes", "-o", "json")
        assert again.returncode == 0 and _doc(again)["created"] == [], again.stderr  # nothing made twice

        shown = _doc(_run(shell, "env", "show", "lab", "-o", "json"))
        listed = json.dumps(shown)
        assert f"{server}/{TORCH}" in listed, listed
        table = _run(shell, "env", "show", "lab").stdout
        assert f"  staged         docker.io/{TORCH} -> {server}/{TORCH}" in table, table

        up = _run(shell, "up", "--env", "lab", "--yes", "-o", "json")
        assert up.returncode == 0, up.stderr
        pulls = {p["image"]: p for p in _pulls(_doc(up))}
        tester = pulls.get(f"{server}/{TORCH}")
        assert tester is not None, pulls  # by tag, from the staged copy
        assert tester["from"] == server and tester["how"] == "pulled", tester
        assert tester["mb_per_s"] and tester["mb_per_s"] > 100, tester  # same-region (~147 MB/s alone)
        probe = next(p for image, p in pulls.items() if image.startswith("nvidia/cuda"))
        assert probe["from"] == "docker.io" and probe["mb_per_s"] < 30, probe  # not staged: Docker Hub

        gone = _run(shell, "env", "delete", "lab", "--yes", "--wait", "-o", "json")
        assert gone.returncode == 0, gone.stderr
        sub = emu["ACAGPU_SUBSCRIPTION"]
        path = (
            f"/subscriptions/{sub}/resourceGroups/rg-acagpu-env-lab/providers/"
            f"Microsoft.ContainerRegistry/registries/{stage['registry']}"
        )
        assert _arm_get(emu, path, "2025-11-01").status_code == 404  # the registry went with the group


def test_a_driver_older_than_the_image_s_cuda_stops_the_run_before_its_container(tmp_path: Path) -> None:
    """The host says 535.54.03 (CUDA 12.2) in GpuDriverInfo; a CUDA 12.8 image cannot run there."""
    with emulator_serve(tmp_path / "emu.env", extra=("--driver-version", "535.54.03")) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        image = "nvidia/cuda:12.8.0-base-ubuntu24.04"
        done = _run(shell, "up", "--env", "lab", "--image", image, "--yes", "-o", "json")
        assert done.returncode == 5, done.stderr
        text = json.dumps(_doc(done))
        assert "535.54.03" in text and "GpuDriverInfo" in text, text
        billing = _arm_get(emu, "/_emulator/billing", "").json()  # a replica bills from its start
        started = [r["resource"] for r in billing["replicas"] if r["resource"].startswith("cuda-probe-")]
        assert started == [], billing  # the probe's container never started
        cache = json.loads((tmp_path / "drivers.json").read_text(encoding="utf-8"))
        assert any(
            v["driver"] == "535.54.03" and v.get("how") == "GpuDriverInfo event" for v in cache.values()
        )


def _registry_path(sub: str, group: str, name: str) -> str:
    return (
        f"/subscriptions/{sub}/resourceGroups/{group}/providers/Microsoft.ContainerRegistry/registries/{name}"
    )


def test_staging_that_cannot_work_says_so_before_anything_is_made(tmp_path: Path) -> None:
    """A caller who may not assign AcrPull, and a registry name held in another subscription: one
    line with the fix, exit 2, and no registry made."""
    from aca_gpu.workflow.env.staging.catalogue import registry_name

    extra = ("--subscriptions", "2", "--faults", "deny:action=Microsoft.Authorization/roleAssignments/write")
    with emulator_serve(tmp_path / "emu.env", extra=extra) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        sub = emu["ACAGPU_SUBSCRIPTION"]
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        name = registry_name(sub, "lab")

        refused = _run(shell, "image", "stage", TORCH, "--env", "lab", "--no-inspect", "--yes", "-o", "json")
        assert refused.returncode == 2, refused.stderr
        error = _doc(refused)["error"]
        assert "AcrPull" in error["message"] and "Role Based Access Control Administrator" in error["hint"]
        assert len([line for line in refused.stderr.splitlines() if line.startswith("error:")]) == 1
        path = _registry_path(sub, "rg-acagpu-env-lab", name)
        assert _arm_get(emu, path, "2025-11-01").status_code == 404  # nothing was made

        # the same name held in the tenant's other subscription (names are global)
        other_sub = next(
            s["subscriptionId"]
            for s in json.loads(_arm_get(emu, "/subscriptions", "2022-12-01").text)["value"]
            if s["subscriptionId"] != sub
        )
        auth = {"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"}
        put = requests.put(
            f"{emu['ACAGPU_ARM_ENDPOINT']}/subscriptions/{other_sub}/resourcegroups/elsewhere",
            params={"api-version": "2025-04-01"},
            json={"location": "eastus"},
            headers=auth,
            verify=emu["ACAGPU_CA_BUNDLE"],
            timeout=10,
        )
        assert put.status_code in (200, 201), put.text
        taken = requests.put(
            f"{emu['ACAGPU_ARM_ENDPOINT']}{_registry_path(other_sub, 'elsewhere', name)}",
            params={"api-version": "2025-11-01"},
            json={"location": "eastus", "sku": {"name": "Basic"}},
            headers=auth,
            verify=emu["ACAGPU_CA_BUNDLE"],
            timeout=10,
        )
        assert taken.status_code in (200, 201), taken.text
        clash = _run(shell, "image", "stage", TORCH, "--env", "lab", "--no-inspect", "--yes", "-o", "json")
        assert clash.returncode == 2, clash.stderr
        assert "taken elsewhere" in _doc(clash)["error"]["message"], clash.stdout
        assert _arm_get(emu, path, "2025-11-01").status_code == 404


def test_acagpu_run_stops_when_the_host_driver_is_older_than_its_image(tmp_path: Path) -> None:
    """`acagpu run --env` of a CUDA 12.8 image on a host whose GpuDriverInfo says 535.54.03: exit 5,
    the driver and the event named, the container never started (nothing billed)."""
    with emulator_serve(tmp_path / "emu.env", extra=("--driver-version", "535.54.03")) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        image = "nvidia/cuda:12.8.0-base-ubuntu24.04"
        done = _run(shell, "run", "--env", "lab", "--yes", "-o", "json", image, "--", "sh", "-c", "echo hi")
        assert done.returncode == 5, done.stderr
        doc = _doc(done)
        assert doc["container"]["status"] == "refused", doc["container"]
        assert "535.54.03" in doc["container"]["reason"] and "GpuDriverInfo" in doc["container"]["reason"]
        billing = _arm_get(emu, "/_emulator/billing", "").json()
        assert [r for r in billing["replicas"] if r["resource"].startswith("run-")] == [], billing


def test_a_streamed_stage_waits_for_acr_s_conversion_and_up_streams_the_image(tmp_path: Path) -> None:
    """`image stage --sku Premium --stream`: the repository's streaming on, the tag's conversion
    requested and waited for on the registry's data plane; `up --env` under `--pulls streaming=on`
    then streams the staged copy. `--stream` of a Standard registry: exit 2, nothing made."""
    from aca_gpu.workflow.env.staging.catalogue import registry_name

    extra = ("--durations", "aca-2026", "--pulls", "streaming=on")
    with emulator_serve(tmp_path / "emu.env", extra=extra) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        sub = emu["ACAGPU_SUBSCRIPTION"]
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        path = _registry_path(sub, "rg-acagpu-env-lab", registry_name(sub, "lab"))

        refused = _run(
            shell, "image", "stage", TORCH, "--env", "lab", "--no-inspect", "--stream", "--yes", "-o", "json"
        )
        assert refused.returncode == 2, refused.stderr
        error = _doc(refused)["error"]
        assert "Premium" in error["message"] and error["hint"] == "add --sku Premium", error
        assert _arm_get(emu, path, "2025-11-01").status_code == 404  # nothing was made

        # Premium alone converts nothing: a conversion is requested, not implied by the SKU
        args = ("image", "stage", TORCH, "--env", "lab", "--no-inspect", "--sku", "Premium", "--yes")
        plain = _run(shell, *args, "-o", "json")
        assert plain.returncode == 0 and _doc(plain)["images"][0]["streaming"] == "off", plain.stderr
        first = _run(shell, "up", "--env", "lab", "--yes", "-o", "json")
        assert first.returncode == 0, first.stderr
        assert {p["how"] for p in _pulls(_doc(first))} == {"pulled"}, _pulls(_doc(first))

        staged = _run(shell | {"ACAGPU_PROGRESS_S": "0.05"}, *args, "--stream", "-o", "json")
        assert staged.returncode == 0, staged.stderr
        stage = _doc(staged)
        server = stage["login_server"]
        assert [(i["staged_as"], i["streaming"]) for i in stage["images"]] == [
            (f"{server}/{TORCH}", "converted")
        ]
        waits = [line for line in staged.stderr.splitlines() if "waiting for streaming artifact" in line]
        assert any("Running" in line for line in waits), staged.stderr  # no silent wait

        # the conversion is ACR's, on the registry's data plane: its operation ended Succeeded
        repo, tag = TORCH.split(":")
        data = f"{emu['ACAGPU_ARM_ENDPOINT']}/_acr/{server}"
        digest = requests.get(
            f"{data}/acr/v1/{repo}/_tags/{tag}", verify=emu["ACAGPU_CA_BUNDLE"], timeout=10
        ).json()["tag"]["digest"]
        op = requests.get(
            f"{data}/acr/v1/{repo}/_streaming/{digest}", verify=emu["ACAGPU_CA_BUNDLE"], timeout=10
        )
        assert op.status_code == 200 and op.json()["status"] == "Succeeded", op.text
        again = _run(shell, *args, "--stream", "-o", "json")  # converted already: not asked again
        assert again.returncode == 0 and _doc(again)["images"][0]["streaming"] == "converted", again.stderr
        same = requests.get(
            f"{data}/acr/v1/{repo}/_streaming/{digest}", verify=emu["ACAGPU_CA_BUNDLE"], timeout=10
        )
        assert same.json()["id"] == op.json()["id"], same.text

        shown = _run(shell, "env", "show", "lab")
        assert f"{server}/{TORCH}" in shown.stdout and "streaming artifact" in shown.stdout, shown.stdout

        up = _run(shell, "up", "--env", "lab", "--yes", "-o", "json")
        assert up.returncode == 0, up.stderr
        pulls = {p["image"]: p for p in _pulls(_doc(up))}
        tester = pulls.get(f"{server}/{TORCH}")
        assert tester is not None and tester["how"] == "streamed", pulls


def test_a_failed_streaming_conversion_is_one_line_and_the_image_stays_staged(tmp_path: Path) -> None:
    """ACR's conversion ends Failed (the emulator's `conversion` fault): exit 7, one error line naming
    the status, and the image that was imported is still recorded (pulled in full, not streamed)."""
    with emulator_serve(tmp_path / "emu.env", extra=("--faults", "conversion")) as emu:
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "ACAGPU_CACHE_DIR": str(tmp_path)}
        shell.pop("ACAGPU_ENV", None)
        made = _run(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        args = ("image", "stage", TORCH, "--env", "lab", "--no-inspect", "--sku", "Premium", "--stream")
        args += ("--yes",)
        failed = _run(shell, *args, "-o", "json")
        assert failed.returncode == 7, failed.stderr
        assert "ended Failed" in _doc(failed)["error"]["message"], failed.stdout
        assert len([line for line in failed.stderr.splitlines() if line.startswith("error:")]) == 1
        assert "Traceback" not in failed.stderr
        shown = _doc(_run(shell, "env", "show", "lab", "-o", "json"))
        images = (shown.get("staged") or {}).get("images") or []
        assert [(i["image"].endswith(TORCH), i["streaming"]) for i in images] == [(True, "off")], shown
