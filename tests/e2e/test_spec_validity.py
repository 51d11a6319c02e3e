"""Every request acagpu sends in its main journeys is valid for the official spec of its api-version.

The journeys (`up`; `up --keep`, `smi`, `down`; `validate`) run against the emulator over HTTPS while
azure-core's transport records each request. Each one must be an operation the spec has at the
api-version it names, with every path segment filled, and its body must match the operation's
schema (no unknown or read-only property, every required one present): facts in spec_facts.py. LRO
status URLs are the service's own and are followed as given; the isolated preview-only calls are
the only other exception.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
from azure.core.pipeline.transport import RequestsTransport
from click.testing import CliRunner

from aca_gpu.azure import api_versions
from aca_gpu.cli import cli
from tests.e2e import spec_facts as spec
from tests.e2e.serving import free_port

Sent = tuple[str, str, Any]  # method, url, parsed JSON body (None when there is none)
STATUS_URL = re.compile(r"operationstatuses|operationresults|asyncoperations|/operations/", re.I)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Sent]]:
    seen: list[Sent] = []
    real = RequestsTransport.send

    def recording(self: RequestsTransport, request: Any, **kwargs: Any) -> Any:
        raw = (
            getattr(request, "content", None)
            or getattr(request, "data", None)
            or getattr(request, "body", None)
        )
        if isinstance(raw, (bytes, bytearray)):
            raw = raw.decode()
        body = json.loads(raw) if isinstance(raw, str) and raw.strip() else None
        seen.append((request.method, request.url, body))
        return real(self, request, **kwargs)

    monkeypatch.setattr(RequestsTransport, "send", recording)
    api_versions.forget()
    yield seen
    api_versions.forget()


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}$", re.I)


OPERATIONS = [(m, _pattern(p), v, body, op) for m, p, v, body, op in spec.OPERATIONS]
PREVIEW = [(m, _pattern(p)) for m, p in spec.PREVIEW_ONLY]


def body_errors(doc: Any, schema: dict[str, Any], where: str = "body") -> list[str]:
    """What in `doc` the schema does not allow: unknown properties, missing required ones, wrong shapes."""
    if schema == spec.S:
        return [] if not isinstance(doc, (dict, list)) else [f"{where}: expected a scalar"]
    if "items" in schema:
        if not isinstance(doc, list):
            return [f"{where}: expected an array"]
        return [e for i, item in enumerate(doc) for e in body_errors(item, schema["items"], f"{where}[{i}]")]
    if "map" in schema:
        if not isinstance(doc, dict):
            return [f"{where}: expected an object"]
        return [e for k, v in doc.items() for e in body_errors(v, schema["map"], f"{where}.{k}")]
    if not isinstance(doc, dict):
        return [f"{where}: expected an object"]
    errors = [f"{where}.{k}: required, missing" for k in schema.get("required", []) if doc.get(k) is None]
    for key, value in doc.items():
        if key not in schema["props"]:
            errors.append(f"{where}.{key}: not a writable property of this schema")
        elif value is None and key in schema.get("nullable", ()):
            continue  # an optional property the SDK sends as null (the query API's workspaces)
        elif value is None:
            errors.append(f"{where}.{key}: null")
        else:
            errors += body_errors(value, schema["props"][key], f"{where}.{key}")
    return errors


def check(requests: list[Sent]) -> tuple[list[str], dict[str, int]]:
    """Problems, and how many requests each operation (or exclusion) accounted for."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for method, url, body in requests:
        parts = urlsplit(url)
        path, query = unquote(parts.path), dict(parse_qsl(parts.query))
        version = query.get("api-version")
        if STATUS_URL.search(path):
            seen["(LRO status URL from the service)"] = seen.get("(LRO status URL from the service)", 0) + 1
            continue
        if version and version.endswith("-preview"):
            if any(m == method and p.match(path) for m, p in PREVIEW):
                seen["(preview-only, excluded)"] = seen.get("(preview-only, excluded)", 0) + 1
            else:
                problems.append(f"{method} {path}: preview api-version {version} outside the isolated calls")
            continue
        found = [o for o in OPERATIONS if o[0] == method and o[1].match(path)]
        if not found:
            problems.append(f"{method} {path}: no such operation in the spec table")
            continue
        _, _, want, schema, operation = found[0]
        seen[operation] = seen.get(operation, 0) + 1
        if version != want:
            problems.append(f"{operation}: api-version {version!r}, the table's spec is {want}")
        if "//" in path or path.endswith("/"):
            problems.append(f"{operation}: an empty path segment in {path}")
        if schema is None and body not in (None, {}):
            problems.append(f"{operation}: sends a body the operation does not take")
        if schema is not None:
            if body is None:
                if not schema.get("optional_body"):
                    problems.append(f"{operation}: no body")
            else:
                problems += [f"{operation}: {e}" for e in body_errors(body, schema)]
    return problems, seen


def _run(*args: str) -> None:
    result = CliRunner().invoke(cli, [*args, "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr


@pytest.mark.slow(18)
def test_main_journeys_send_only_spec_valid_requests(emu: Any, sent: list[Sent]) -> None:
    _run("up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "5")
    _run("up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "5", "--keep", "--run-id", "spec1")
    _run("smi", "--run-id", "spec1")
    _run("down", "--run-id", "spec1", "--yes")
    _run(
        "validate",
        "--yes",
        "--image",
        "nvidia/cuda:12.1.1-runtime-ubuntu22.04",
        "--gpu",
        "t4",
        "--gpu",
        "a100",
        "--no-inspect",
        "-l",
        "eastus",
    )
    _run("env", "create", "spec", "--gpu", "t4", "-l", "eastus", "--yes")
    # staging: the name check, the registry, the environment's identity, AcrPull, ARM's import
    torch = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    _run("image", "stage", torch, "--env", "spec", "--no-inspect", "--yes")
    _run("up", "--yes", "--env", "spec", "--max-minutes", "5")
    _run("test", "--env", "spec", "--timeout", "5m", "--yes")
    # a container gone before its log stream is read: its lines come from Log Analytics' query API
    emu.set_faults("linger:seconds=0")
    result = CliRunner().invoke(
        cli, ["run", "--yes", "--env", "spec", "-o", "json", "busybox", "--", "sh", "-c", "echo hi"]
    )
    assert result.exit_code == 0, result.stderr
    emu.set_faults("")
    _run("env", "list")
    # a fan-out: one job, an execution per shard with its own template, the environment's usages
    _run("run", "--yes", "--env", "spec", "--shards", "3", "--parallel", "2", "--logs", "none", "busybox")
    # a served app: external ingress, an HTTP scale rule, a startup probe, a secret (acagpu serve)
    port = str(free_port())
    os.environ["SPEC_MODEL_TOKEN"] = "spec-secret"
    try:  # -o json before IMAGE: what follows IMAGE is the container's command
        served = CliRunner().invoke(
            cli,
            ["serve", "--yes", "--env", "spec", "--run-id", "spsv", "--port", port, "--secret-env",
             "SPEC_MODEL_TOKEN", "-o", "json", "python:3.12-slim", "--",
             "python3", "-m", "http.server", port],
        )  # fmt: skip
        assert served.exit_code == 0, served.stderr
    finally:
        del os.environ["SPEC_MODEL_TOKEN"]
    _run("down", "--run-id", "spsv", "--yes")
    _run("env", "delete", "spec", "--yes")
    problems, seen = check(sent)
    starts = [body for method, url, body in sent if method == "POST" and url.split("?")[0].endswith("/start")]
    assert any(body and body.get("containers") for body in starts), "no job start with a template"
    assert not problems, "\n".join(problems)
    for operation in (
        "ResourceGroups_CreateOrUpdate",
        "ManagedEnvironments_CreateOrUpdate",
        "ContainerApps_CreateOrUpdate",
        "Jobs_CreateOrUpdate",
        "Jobs_Start",
        "ContainerApps_Stop",
        "ContainerApps_Start",
        "Usages_List",
        "Workspaces_CreateOrUpdate",
        "SharedKeys_GetSharedKeys",
        "ManagedEnvironmentUsages_List",
        "JobsExecutions_List",
        "Registries_CheckNameAvailability",
        "Registries_Create",
        "Registries_ImportImage",
        "RoleAssignments_Create",
        "ManagedEnvironments_Update",
    ):
        assert seen.get(operation), f"{operation} was never exercised: {seen}"
    print(json.dumps({"requests": len(sent), "by_operation": dict(sorted(seen.items()))}, indent=1))


def test_the_checker_catches_what_the_spec_forbids() -> None:
    """A read-back document (server-only fields), a missing required field and an unknown path fail."""
    base = "https://x/subscriptions/s/resourceGroups/rg/providers/Microsoft.App"
    read_back = {
        "location": "eastus",
        "properties": {
            "provisioningState": "Succeeded",
            "template": {
                "containers": [
                    {
                        "name": "c",
                        "image": "i",
                        "resources": {"cpu": 1, "memory": "2Gi", "ephemeralStorage": "8Gi"},
                    }
                ]
            },
        },
    }
    job = {"location": "eastus", "properties": {"configuration": {"triggerType": "Manual"}}}
    problems, _ = check(
        [
            ("PUT", f"{base}/containerApps/a?api-version=2026-07-01", read_back),
            ("PUT", f"{base}/jobs/j?api-version=2026-07-01", job),
            ("POST", f"{base}/containerApps/a/scale?api-version=2026-07-01", None),
            ("GET", f"{base}/containerApps/a?api-version=2023-05-01", None),
            ("POST", f"{base}/containerApps/a/getAuthToken?api-version=2024-10-02-preview", None),
        ]
    )
    text = "\n".join(problems)
    assert "properties.provisioningState: not a writable property" in text
    assert "ephemeralStorage: not a writable property" in text
    assert "configuration.replicaTimeout: required, missing" in text
    assert "containerApps/a/scale: no such operation" in text
    assert "api-version '2023-05-01'" in text
    assert "outside the isolated calls" in text


def test_queue_modes_event_job_is_a_spec_valid_job(tmp_path: Any) -> None:
    """`run --workers`'s Event job (azure-queue rule, system identity), as `job_body` makes it."""
    from aca_gpu.azure.app_bodies import job_body
    from aca_gpu.config import Settings
    from aca_gpu.models import ContainerDef, JobSpec
    from aca_gpu.workflow.queue.spec import make_queue_spec
    from aca_gpu.workflow.queue.worker import event_job
    from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

    items = tmp_path / "items.txt"
    items.write_text("a\nb\n")
    request = RunRequest(image="busybox", command=("true",), env_name="lab", run_id="q1")
    queue = make_queue_spec(make_run_spec(Settings(), request, owner="me"), map_file=str(items), workers=3)
    container = ContainerDef(name="main", image="busybox", cpu=8, memory="56Gi", args=("true",))
    where = {"resource_group": "rg", "location": "eastus", "environment_id": "/env"}
    job = JobSpec(name="run-q1", workload_profile_name="gpu", container=container, tags={}, **where)
    body = job_body(event_job(job, queue, "acct1", "https://acct1.queue.core.windows.net/"))
    base = "https://x/subscriptions/s/resourceGroups/rg/providers/Microsoft.App"
    problems, seen = check([("PUT", f"{base}/jobs/run-q1?api-version=2026-07-01", body)])
    assert problems == [] and seen == {"Jobs_CreateOrUpdate": 1}
    body["properties"]["configuration"]["eventTriggerConfig"]["scale"]["rules"][0]["auth"] = [{}]
    problems, _ = check([("PUT", f"{base}/jobs/run-q1?api-version=2026-07-01", body)])
    assert problems and "auth: not a writable property" in problems[0]  # the table knows no key auth


def test_the_warm_floors_drop_is_a_spec_valid_job_update() -> None:
    """`--warm K`'s floor set back to 0 (a PATCH of minExecutions alone)."""
    from aca_gpu.azure.app_bodies import event_floor_patch

    base = "https://x/subscriptions/s/resourceGroups/rg/providers/Microsoft.App"
    problems, seen = check(
        [("PATCH", f"{base}/jobs/run-q1?api-version=2026-07-01", event_floor_patch(0, 1800))]
    )
    assert problems == [] and seen == {"Jobs_Update": 1}
