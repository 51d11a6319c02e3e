"""`acagpu serve` refuses before anything exists: an image whose CUDA the host driver cannot run
(exit 5, as `run` judges the driver's own event), and a `--mount` the warm environment has no
storage for (exit 2). The emulator's inventory shows that nothing of the run was made."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from aca_gpu.azure.served import ServedAppSpec, served_body
from aca_gpu.cli import cli
from aca_gpu.models import AppSpec, ContainerDef


def serve(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["serve", "--yes", "-o", "json", *args])
    return result.exit_code, json.loads(result.stdout)


def run_made(emu: Any, run_id: str) -> list[str]:
    inventory = emu.inventory()
    groups = [g["name"] for g in inventory["resource_groups"] if run_id in g["name"]]
    return groups + [a["name"] for a in inventory["apps"] if run_id in a["name"]]


def test_an_image_the_host_driver_cannot_run_is_refused_before_deploying(emu: Any) -> None:
    code, doc = serve("--run-id", "cu1", "nvidia/cuda:13.1.0-runtime-ubuntu24.04")
    assert code == 5 and doc["status"] == "failed", doc
    assert doc["error"]["code"] == "CudaIncompatible"
    assert "580.159.04" in doc["error"]["message"] and "bundled" in doc["error"]["message"]
    assert doc["teardown"] is None and run_made(emu, "cu1") == []


def test_a_mount_without_its_storage_is_refused_before_anything_of_the_run_exists(emu: Any) -> None:
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    code, doc = serve("--env", "lab", "--run-id", "mt1", "--mount", "weights:/models", "python:3.12-slim")
    assert code == 2 and doc["error"]["code"] == "StorageNotFound", doc
    assert "weights" in doc["error"]["message"] and run_made(emu, "mt1") == []


def test_a_mount_becomes_the_apps_azure_files_volume() -> None:
    container = ContainerDef(name="main", image="m:1", cpu=8, memory="56Gi", mounts=(("share-1", "/models"),))
    app = AppSpec(
        resource_group="rg", name="serve-x", location="eastus", environment_id="/e",
        workload_profile_name="gpu", container=container, tags={},
    )  # fmt: skip
    body = served_body(ServedAppSpec(app=app, port=8000, volumes=(("share-1", "weights"),)))
    template = body["properties"]["template"]
    assert template["volumes"] == [{"name": "share-1", "storageType": "AzureFile", "storageName": "weights"}]
    assert template["containers"][0]["volumeMounts"] == [{"volumeName": "share-1", "mountPath": "/models"}]


def test_a_model_killed_for_memory_ends_the_wait_at_once_with_exit_5(emu: Any) -> None:
    """The `oom` fault: the container is killed for memory as the model loads; serve says so in the
    platform's words at once (not after the load timeout) and tears down what it made."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    stand_in = ("python:3.12-slim", "--", "python3", "-m", "http.server", port, "--bind", "127.0.0.1")
    emu.set_faults("oom")
    code, doc = serve("--run-id", "oom1", "--port", port, "--load-timeout", "10m", *stand_in)
    assert code == 5 and doc["error"]["code"] == "OOMKilled", doc["error"]
    assert "OOMKilled" in doc["error"]["message"] and doc["teardown"]["billing_stopped"], doc
    assert run_made(emu, "oom1") == [] or doc["teardown"]["status"] == "deleting"
