"""`acagpu run`'s job body (secrets as references, registries) and its output capture, without a cloud."""

from __future__ import annotations

import io
import json

import pytest

from aca_gpu.azure.app_bodies import job_body
from aca_gpu.config import Settings
from aca_gpu.workflow.workload import outcome
from aca_gpu.workflow.workload.aca import Where, job_spec
from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

TOKEN, PASSWORD = "tok-value-123456", "registry-pass-987"


def _body(monkeypatch: pytest.MonkeyPatch, **extra: object) -> dict[str, object]:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("REG_PASS", PASSWORD)
    request = RunRequest(
        image="myreg.azurecr.io/team/train:1.0",
        command=("python", "train.py", "--epochs", "1"),
        env=("MODEL=llama",),
        secret_env=("HF_TOKEN",),
        run_id="body1",
        **extra,  # type: ignore[arg-type]
    )
    spec = make_run_spec(Settings(), request, owner="me")
    plan, pair = spec.plan, spec.plan.pairs[0]
    where = Where(
        "rg-acagpu-body1", "eastus", "/envs/x", "cae-acagpu-body1", "gpu", plan.tags, "rg-acagpu-body1"
    )
    return job_body(job_spec(spec, plan, pair, where))


def test_secrets_travel_as_references_and_only_in_the_secrets_list(monkeypatch: pytest.MonkeyPatch) -> None:
    body = _body(monkeypatch, registry_username="puller", registry_password_env="REG_PASS")
    props = body["properties"]
    assert isinstance(props, dict)
    config, container = props["configuration"], props["template"]["containers"][0]
    assert container["args"] == ["python", "train.py", "--epochs", "1"] and "command" not in container
    assert {"name": "MODEL", "value": "llama"} in container["env"]
    assert {"name": "HF_TOKEN", "secretRef": "env-hf-token"} in container["env"]
    assert config["registries"] == [
        {"server": "myreg.azurecr.io", "username": "puller", "passwordSecretRef": "registry-password"}
    ]
    secrets = {s["name"]: s["value"] for s in config.pop("secrets")}
    assert secrets == {"env-hf-token": TOKEN, "registry-password": PASSWORD}
    rest = json.dumps(body)
    assert TOKEN not in rest and PASSWORD not in rest  # not in env, tags, or anywhere else
    assert config["replicaTimeout"] == 30 * 60 and body["tags"]["acagpu:run-id"] == "body1"


def test_a_registry_identity_needs_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    body = _body(monkeypatch, registry_identity="system")
    config = body["properties"]["configuration"]  # type: ignore[index]
    assert config["registries"] == [{"server": "myreg.azurecr.io", "identity": "system"}]
    assert [s["name"] for s in config["secrets"]] == ["env-hf-token"]


def test_the_plan_and_its_repr_hold_no_secret_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    spec = make_run_spec(Settings(), RunRequest(image="busybox", secret_env=("HF_TOKEN",)), owner="me")
    assert TOKEN not in repr(spec) and TOKEN not in json.dumps(spec.as_dict())


def test_json_output_is_capped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcome, "MAX_LINES", 3)
    out = io.StringIO()
    console = outcome.Console(False, lambda: out, lambda: out)
    for i in range(5):
        console.line("stdout", f"line{i}")
    console.line("stderr", "err")
    doc = console.as_dict()
    assert doc["stdout"] == "line0\nline1\nline2\n" and doc["stderr"] == "err\n"
    assert doc["truncated"]["stdout_lines_dropped"] == 2 and "capped" in doc["truncated"]["note"]
    assert out.getvalue() == ""  # collected, not printed (-o json)
