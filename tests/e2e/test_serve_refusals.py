"""`acagpu serve` refuses before anything exists: an image whose CUDA the host driver cannot run
(exit 5, as `run` judges the driver's own event), and a `--mount` the warm environment has no
storage for (exit 2). The emulator's inventory shows that nothing of the run was made."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

from click.testing import CliRunner

from aca_gpu.azure.served import ServedAppSpec, served_body
from aca_gpu.cli import cli
from aca_gpu.models import AppSpec, ContainerDef
from tests.e2e.serving import free_port, signal_when_said


def serve(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(cli, ["serve", "--yes", "-o", "json", *args])
    return result.exit_code, json.loads(result.stdout)


def stand_in(port: str) -> tuple[str, ...]:
    """A real HTTP server as the model (the emulator runs its command for real)."""
    return ("python:3.12-slim", "--", "python3", "-m", "http.server", port, "--bind", "127.0.0.1")


def app_bill(emu: Any, run_id: str) -> list[dict[str, Any]]:
    """The emulator's bill: the replica lives of `run_id`'s app."""
    return [r for r in emu.billing()["replicas"] if r["run_id"] == run_id and r["kind"] == "app"]


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
    port = str(free_port())
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    emu.set_faults("oom")
    code, doc = serve(
        "--env", "lab", "--run-id", "oom1", "--port", port, "--load-timeout", "10m", *stand_in(port)
    )
    assert code == 5 and doc["error"]["code"] == "OOMKilled", doc["error"]
    assert "OOMKilled" in doc["error"]["message"] and doc["teardown"]["billing_stopped"], doc
    assert run_made(emu, "oom1") == [] or doc["teardown"]["status"] == "deleting"


def test_teardown_stops_a_served_apps_billing_before_its_delete(emu: Any) -> None:
    """Billing first: the app is scaled to 0 replicas before it is deleted, so deletes that are
    refused (here: the caller may delete neither container apps nor groups) leave nothing billing.
    The model answers from the CPU (`cpu_fallback`): serve says its GPU was left idle."""
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.engine.teardown import teardown_group

    port = str(free_port())
    emu.set_faults("cpu_fallback")
    code, served = serve("--run-id", "bf1", "--port", port, *stand_in(port))
    assert code == 0 and served["status"] == "serving", served
    assert served["gpu_use"]["idle"] is True and "CPU" in served["gpu_use"]["note"], served["gpu_use"]
    assert [r["running"] for r in app_bill(emu, "bf1")] == [True]

    emu.set_faults(
        "deny:action=Microsoft.App/containerApps/delete;"
        "deny:action=Microsoft.Resources/subscriptions/resourceGroups/delete"
    )
    result = teardown_group(
        open_cloud(load_settings()), "rg-acagpu-bf1", wait_gone=False, poll=0.05, billing_deadline=0.5
    )
    assert result.status == "incomplete" and "serve-bf1" in (result.message or "")
    bill = app_bill(emu, "bf1")
    assert bill and not [r for r in bill if r["running"]], bill  # nothing bills though the app is there

    emu.set_faults("")
    done = CliRunner().invoke(cli, ["down", "--run-id", "bf1", "--yes", "--no-wait", "-o", "json"])
    assert json.loads(done.stdout)["teardown"]["billing_stopped"] is True


def test_a_startup_probe_that_never_passes_is_said_with_its_probe_and_torn_down(emu: Any) -> None:
    """The `probe` fault: the replica's startup probe fails every look. The platform's events say so
    (ReplicaUnhealthy each look, StoppingContainer at the last) and the revision reads Unhealthy;
    serve ends its wait at once with the probe it set (path, port, looks, load timeout) in the
    platform's words, exit 4, and tears down what it made."""
    port = str(free_port())
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    emu.set_faults("probe:status=503")
    code, doc = serve(
        "--env", "lab", "--run-id", "pb1", "--port", port, "--health", "/ready", "--load-timeout", "2s",
        *stand_in(port),
    )  # fmt: skip
    assert code == 4 and doc["error"]["code"] == "ProbeFailed", doc["error"]
    said = doc["error"]["message"]
    assert f"GET /ready on port {port}, 2 look(s) 1 s apart" in said and "--load-timeout 2s" in said, said
    assert '"startup probe failed: HTTP probe failed with statuscode: 503"' in said, said
    assert "failed startup probe, will be restarted" in said and "healthState Unhealthy" in said, said
    assert doc["teardown"]["billing_stopped"], doc["teardown"]
    assert run_made(emu, "pb1") == [] or doc["teardown"]["status"] == "deleting"


def serve_until_said(wanted: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """`acagpu serve` as a real process; Ctrl-C once its stderr says `wanted` while it waits for its
    first answer (the wait would last its whole start and load timeouts): exit code, document, stderr."""
    env = {**os.environ, "ACAGPU_PROGRESS_S": "0.3"}
    done = signal_when_said(["serve", "--yes", "-o", "json", *args], [(wanted, signal.SIGINT)], env=env)
    assert wanted in done.said, done.stderr  # said while it waited, before the Ctrl-C
    return done.returncode, json.loads(done.stdout), done.stderr


def test_no_capacity_is_said_while_serve_waits_not_at_its_timeout(emu: Any) -> None:
    """`nocapacity`: the revision counts a replica, the platform lists none. serve warns at once that
    no node has taken it (the wait would otherwise last its start and load timeouts in silence)."""
    port = str(free_port())
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    emu.set_faults("nocapacity")
    code, doc, err = serve_until_said(
        "warning: serve-nc1: not placed", "--env", "lab", "--run-id", "nc1", "--port", port, *stand_in(port)
    )
    assert "the revision counts 1 replica(s) and the platform lists none" in err, err
    assert code == 130 and doc["status"] == "interrupted" and doc["teardown"]["billing_stopped"], doc


def test_a_stalled_pull_is_said_while_serve_waits(emu: Any) -> None:
    """`pull_stall`: the replica's pull began and never ends; serve's waiting line says so in the
    platform's words while it waits."""
    port = str(free_port())
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    emu.set_faults("pull_stall")
    code, doc, err = serve_until_said(
        "pulling the image for", "--env", "lab", "--run-id", "ps1", "--port", port, *stand_in(port)
    )
    assert 'not ended yet (Pulling image "python:3.12-slim")' in err, err
    assert code == 130 and doc["status"] == "interrupted" and doc["teardown"]["billing_stopped"], doc


def test_a_full_profile_ends_serves_wait_at_once_with_exit_3(emu: Any) -> None:
    """`wpfull` (#1705): the create answers 504 but the app exists, its replica never placed with the
    record "WorkLoad Profile Full"; serve follows the app and ends with exit 3 at once."""
    port = str(free_port())
    assert CliRunner().invoke(cli, ["env", "create", "lab", "--yes", "-o", "json"]).exit_code == 0
    emu.set_faults("wpfull")
    started = time.monotonic()
    code, doc = serve("--env", "lab", "--run-id", "wf1", "--port", port, *stand_in(port))
    assert code == 3 and doc["error"]["code"] == "CapacityUnavailable", doc["error"]
    assert "WorkLoad Profile Full" in doc["error"]["message"] and doc["teardown"]["billing_stopped"]
    assert time.monotonic() - started < 30  # neither the start timeout (15 min) nor six 504 back-offs (50 s)
