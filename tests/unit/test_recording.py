"""The `--record` sanitizer on a recording that holds every kind of secret, and the replay script's
matching rules (order per resource, generated names, strictness)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from aca_gpu import recording
from aca_gpu.emulator.replay_script import Script
from aca_gpu.errors import BadInput

SUB = "6f1d3b2a-5c4e-4a8b-9d0f-1e2a3b4c5d6e"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
OBJECT_ID = "9b2c1d4e-0f3a-4b5c-8d7e-6f5a4b3c2d1e"
CLIENT_ID = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
EMAIL = "jane.doe@contoso.com"
SECRET = "hunter2-Zq8xW"
ENV_SECRET = "sk-live-77aa88bb99cc"
SHARED_KEY = "c2hhcmVkLWtleS1mb3ItbG9nLWFuYWx5dGljcw=="
LOG_PASSWORD = "p4ssw0rd-in-a-log"
PUBLIC_IP = "20.62.141.7"


def _jwt(claims: dict[str, object]) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJlLWJ5dGVz"


TOKEN = _jwt({"tid": TENANT, "oid": OBJECT_ID, "upn": EMAIL, "aud": "https://management.azure.com"})
APP_TOKEN = _jwt({"capp_sub": SUB, "capp_name": "cuda-explorer-abc123"})
SECRETS = [SUB, TENANT, OBJECT_ID, CLIENT_ID, EMAIL, SECRET, ENV_SECRET, SHARED_KEY, LOG_PASSWORD, PUBLIC_IP]


def _record(folder: Path) -> recording.Recorder:
    rec = recording.Recorder(folder)
    base = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg-acagpu-abc123/providers"
    job = {
        "location": "eastus",
        "tags": {"acagpu:owner": EMAIL, "acagpu:run-id": "abc123"},
        "identity": {"type": "SystemAssigned", "principalId": OBJECT_ID, "tenantId": TENANT},
        "properties": {
            "environmentId": f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.App/jobs/e",
            "configuration": {"secrets": [{"name": "registry-password", "value": SECRET}]},
            "template": {"containers": [{"env": [{"name": "OPENAI_API_KEY", "value": ENV_SECRET}]}]},
        },
        "systemData": {"createdBy": EMAIL, "createdByType": "User"},
    }
    answer = {**job, "properties": {**job["properties"], "outboundIpAddresses": [PUBLIC_IP]}}
    headers = {"Azure-AsyncOperation": f"{base}/op/{CLIENT_ID}", "X-Other": "x"}
    url = f"{base}/Microsoft.App/jobs/gpu-tester-abc123?api-version=2025-07-01"
    rec.exchange("PUT", url, json.dumps(job), 201, headers, json.dumps(answer))
    env = {"properties": {"appLogsConfiguration": {"logAnalyticsConfiguration": {"sharedKey": SHARED_KEY}}}}
    rec.exchange("PUT", f"{base}/Microsoft.App/managedEnvironments/e", json.dumps(env), 201, {}, "{}")
    token = {"properties": {"token": APP_TOKEN, "expires": "2026-01-01T00:00:00Z"}}
    rec.exchange(
        "POST", f"{base}/Microsoft.App/containerApps/a/getAuthToken", None, 200, {}, json.dumps(token)
    )
    log = "\n".join(
        [
            json.dumps({"Log": f"login as {EMAIL} with password={LOG_PASSWORD}"}),
            json.dumps({"Log": f"Authorization: Bearer {TOKEN}"}),
            json.dumps({"Log": f"the secret is {SECRET} and tenant {TENANT}"}),
        ]
    )
    rec.exchange("GET", "https://eastus.azurecontainerapps.dev/x/logstream?follow=true", None, 200, {}, log)
    rec.websocket(
        f"wss://eastus.azurecontainerapps.dev/subscriptions/{SUB}/exec?command=sh",
        101,
        [{"dir": "in", "head": [0, 1], "text": f"GPU-{OBJECT_ID} key {ENV_SECRET}"}],
    )
    rec.finish("up", 0)
    return rec


def test_no_secret_of_any_kind_reaches_the_recording(tmp_path: Path) -> None:
    _record(tmp_path)
    text = (tmp_path / recording.RECORDING_FILE).read_text(encoding="utf-8")
    text += (tmp_path / recording.META_FILE).read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked"
    assert "eyJ" not in text  # no token of any audience, whole or in part
    assert TOKEN.split(".")[1] not in text and APP_TOKEN.split(".")[1] not in text
    guids = set(recording.GUID.findall(text))
    assert guids and all(re.fullmatch(r"00000000-0000-4000-8000-\d{12}", g) for g in guids)
    emails = set(recording.EMAIL.findall(text))
    assert emails and all(e.endswith("@example.com") for e in emails)


def test_placeholders_are_consistent_across_lines(tmp_path: Path) -> None:
    rec = _record(tmp_path)
    lines = [json.loads(ln) for ln in rec.path.read_text(encoding="utf-8").splitlines()]
    sub = rec.sanitizer.seen[f"guid:{SUB}"]
    assert f"/subscriptions/{sub}/" in lines[0]["uri"] and f"/subscriptions/{sub}/" in lines[4]["uri"]
    put = lines[0]
    secret = put["request_body"]["properties"]["configuration"]["secrets"][0]["value"]
    assert secret.startswith("<secret-") and secret in lines[3]["response_body"]  # echoed in a log line
    assert put["response_body"]["tags"]["acagpu:run-id"] == "abc123"  # names a replay needs survive
    assert put["response_body"]["tags"]["acagpu:owner"] == put["request_body"]["tags"]["acagpu:owner"]
    assert put["response_headers"] == {
        "azure-asyncoperation": put["response_headers"]["azure-asyncoperation"]
    }
    assert json.loads((tmp_path / recording.META_FILE).read_text())["subscription"] == sub
    assert [ln["Log"].split()[0] for ln in lines[3]["response_body_ndjson"]] == [
        "login",
        "Authorization:",
        "the",
    ]


def test_a_recording_is_never_overwritten(tmp_path: Path) -> None:
    _record(tmp_path)
    with pytest.raises(BadInput, match="already holds a recording"):
        recording.Recorder(tmp_path)


# ---- the replay script -----------------------------------------------------------------------------
def _line(
    method: str, path: str, status: int = 200, body: object = None, answer: object = ""
) -> dict[str, object]:
    return {
        "method": method,
        "uri": f"https://management.azure.com{path}?api-version=2025-07-01",
        "request_body": body,
        "status": status,
        "response_headers": {},
        "response_body": answer,
    }


RG = "/subscriptions/s/resourcegroups/rg-acagpu-a95813"
APP = RG + "/providers/Microsoft.App/containerApps/cuda-explorer-a95813"
JOB = RG + "/providers/Microsoft.App/jobs/gpu-tester-a95813"


def test_script_learns_generated_names_and_answers_with_them() -> None:
    script = Script(
        [_line("PUT", RG, 201, {"location": "x"}, {"name": "rg-acagpu-a95813"}), _line("GET", APP)]
    )
    ex = script.match("PUT", RG.replace("a95813", "0f0f0f"), "api-version=2025-07-01", {"location": "y"})
    assert ex is not None and script.live_of == {"a95813": "0f0f0f"}
    assert script.live_text(json.dumps(ex.line["response_body"]), "https://127.0.0.1:1") == (
        '{"name": "rg-acagpu-0f0f0f"}'
    )
    # a second, different name in the same place is refused: names are learned once
    assert script.match("GET", APP.replace("a95813", "1e1e1e"), "api-version=2025-07-01", None) is None
    assert script.report()["ok"] is False


def test_script_keeps_order_per_resource_but_lets_resources_interleave() -> None:
    script = Script([_line("PUT", APP, 201, {}), _line("PUT", JOB, 201, {}), _line("GET", APP, answer="1"),
                     _line("GET", APP, answer="2")])  # fmt: skip
    q = "api-version=2025-07-01"
    assert (
        script.match("PUT", JOB, q, {}) is not None
    )  # the job before the app: other resources may interleave
    assert script.match("PUT", APP, q, {}) is not None
    answers = [script.match("GET", APP, q, None) for _ in range(3)]
    assert [a.line["response_body"] for a in answers if a] == ["1", "2", "2"]  # a 3rd poll repeats the last
    assert script.report() | {"mismatches": []} == script.report() and script.report()["ok"] is True


def test_script_refuses_unrecorded_writes_other_versions_and_other_bodies() -> None:
    script = Script([_line("PUT", APP, 201, {"properties": {"template": {}}}), _line("DELETE", JOB, 202)])
    assert script.match("PUT", APP, "api-version=2026-01-01", {"properties": {"template": {}}}) is None
    assert script.match("PUT", APP, "api-version=2025-07-01", {"properties": {"other": {}}}) is None
    assert script.match("POST", APP + "/stop", "api-version=2025-07-01", None) is None
    report = script.report()
    assert len(report["mismatches"]) == 3 and report["unused_writes"] == [f"PUT {APP}", f"DELETE {JOB}"]


def test_script_never_learns_a_name_the_service_made_up() -> None:
    """Operation ids come from answers: polling the other operation is a mismatch, not a new name."""
    op = "/subscriptions/s/providers/Microsoft.App/locations/eastus/containerappOperationResults/"
    lines = []
    for resource, op_id in ((APP, "op000001"), (JOB, "op000002")):
        deleted = _line("DELETE", resource, 202)
        deleted["response_headers"] = {"location": f"https://management.azure.com{op}{op_id}"}
        lines.append(deleted)
    script = Script([*lines, _line("GET", op + "op000001", 204), _line("GET", op + "op000002", 204)])
    q = "api-version=2025-07-01"
    assert script.match("DELETE", APP, q, None) is not None
    assert script.match("GET", op + "op000003", q, None) is None
    assert script.match("GET", op + "op000001", q, None) is not None
    assert script.live_of == {}


def test_sanitizing_twice_changes_nothing_more() -> None:
    """A placeholder is never taken for a secret again (`token=<secret-1>` stays so)."""
    s = recording.Sanitizer()
    s.secret(SECRET)
    once = s.text(f"token={SECRET} password='{LOG_PASSWORD}' by {EMAIL} in {TENANT}")
    assert once == s.text(once) and SECRET not in once and LOG_PASSWORD not in once
    assert s.value({"secretRef": "registry-password", "password": "x1"}, "body") == {
        "secretRef": "registry-password",  # which secret, not its value: kept
        "password": s.secret("x1"),
    }


def test_a_short_secret_is_replaced_where_it_stands_alone_only() -> None:
    from aca_gpu.recording import Sanitizer

    sanitizer = Sanitizer()
    placeholder = sanitizer.secret("ab1Z9")
    assert sanitizer.text("token is ab1Z9.") == f"token is {placeholder}."
    assert sanitizer.text("xab1Z9y stays") == "xab1Z9y stays"  # inside a word it is not the secret
    sanitizer.secret("7")  # too short to look for in free text: logs keep their digits
    assert sanitizer.text("exit 7") == "exit 7"


# ---- secrets by what a field is ------------------------------------------------------------------
STORAGE_KEY = base64.b64encode(bytes(range(7, 71))).decode()  # 88 characters, as Azure's
KERB_KEY = base64.b64encode(bytes(range(100, 164))).decode()
BARE_KEY = base64.b64encode(bytes(range(180, 244))).decode()
ACR_PASSWORD = "Zk3+q9TtVvB1x/aa0PL2mW7cRr5Yy8Nn"
WORKSPACE_KEY = base64.b64encode(bytes(range(30, 94))).decode()
SAS_SIG = "kQ9%2Fx7Lr3mN0pZ%2Bq1wS8vY4tU6cE2hJ5gF%3D"
BASIC = base64.b64encode(b"acagpuregistry:" + ACR_PASSWORD.encode()).decode()


def _answers() -> list[tuple[str, object, object]]:
    """(url tail, request, answer) for every secret-bearing call the Azure APIs acagpu uses can
    answer, in the shapes Azure documents them."""
    return [
        (
            "Microsoft.Storage/storageAccounts/s/listKeys",
            None,
            {
                "keys": [
                    {"keyName": "key1", "value": STORAGE_KEY, "permissions": "FULL"},
                    {"keyName": "kerb1", "value": KERB_KEY, "permissions": "FULL"},
                ]
            },
        ),
        (
            "Microsoft.ContainerRegistry/registries/r/listCredentials",
            None,
            {
                "username": "acagpuregistry",
                "passwords": [
                    {"name": "password", "value": ACR_PASSWORD},
                    {"name": "password2", "value": ACR_PASSWORD[::-1]},
                ],
            },
        ),
        (
            "Microsoft.OperationalInsights/workspaces/w/sharedKeys",
            None,
            {"primarySharedKey": WORKSPACE_KEY, "secondarySharedKey": WORKSPACE_KEY[::-1]},
        ),
        ("Microsoft.App/jobs/j/listSecrets", None, {"value": [{"name": "reg-pw", "value": "Qw9!long-pw"}]}),
        ("Microsoft.App/containerApps/a/getAuthToken", None, {"properties": {"token": "opaque-aca-token-1"}}),
        (
            "Microsoft.Storage/storageAccounts/s/ListAccountSas",
            {"signedPermission": "r"},
            {"accountSasToken": f"sv=2022-11-02&ss=f&sig={SAS_SIG}"},
        ),
        (
            "Microsoft.App/managedEnvironments/e",
            {
                "properties": {
                    "appLogsConfiguration": {
                        "logAnalyticsConfiguration": {"customerId": "ws", "sharedKey": WORKSPACE_KEY}
                    },
                    "daprAIConnectionString": f"InstrumentationKey=x;IngestionEndpoint=https://x;AccountKey={STORAGE_KEY}",
                }
            },
            {},
        ),
    ]


def test_every_secret_bearing_answer_is_scrubbed_by_what_its_fields_are(tmp_path: Path) -> None:
    rec = recording.Recorder(tmp_path)
    base = f"https://management.azure.com/subscriptions/{SUB}/resourceGroups/rg/providers"
    for tail, request, answer in _answers():
        rec.exchange(
            "POST",
            f"{base}/{tail}?api-version=x",
            json.dumps(request) if request else None,
            200,
            {},
            json.dumps(answer),
        )
    # ACR's token exchange: a form body, a refresh token back (not a JWT here: caught by its field)
    rec.exchange(
        "POST",
        "https://r.azurecr.io/oauth2/exchange",
        f"grant_type=access_token&service=r&access_token={ACR_PASSWORD}",
        200,
        {},
        json.dumps({"refresh_token": "rt-Opaque-77xx"}),
    )
    logs = "\n".join(
        [
            f"DefaultEndpointsProtocol=https;AccountName=s;AccountKey={STORAGE_KEY};EndpointSuffix=core.windows.net",
            f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey={ACR_PASSWORD}",
            f"GET https://s.file.core.windows.net/share?sv=2022-11-02&sp=r&sig={SAS_SIG}",
            f"Authorization: Basic {BASIC}",
            f"x-ms-authorization: SharedKey s:{WORKSPACE_KEY[:44]}",
            f"the key, bare: {BARE_KEY}",  # no name beside it: caught by its shape
            "IDENTITY_HEADER=f0e1d2c3b4a5-managed-identity-header",  # `env` in an exec session
            "TOKENIZERS_PARALLELISM=false and sha256:" + "ab12" * 16,  # neither is a secret
        ]
    )
    rec.exchange("GET", "https://eastus.azurecontainerapps.dev/x/logstream", None, 200, {}, logs)
    rec.websocket("wss://eastus.azurecontainerapps.dev/x/exec?token=opaque-exec-token&command=sh", 101, [])
    rec.finish("run", 0)
    text = (tmp_path / recording.RECORDING_FILE).read_text(encoding="utf-8")
    for secret in (
        STORAGE_KEY,
        KERB_KEY,
        ACR_PASSWORD,
        ACR_PASSWORD[::-1],
        WORKSPACE_KEY,
        WORKSPACE_KEY[::-1],
        WORKSPACE_KEY[:44],
        "Qw9!long-pw",
        "opaque-aca-token-1",
        SAS_SIG,
        BASIC,
        BARE_KEY,
        "rt-Opaque-77xx",
        "opaque-exec-token",
        "f0e1d2c3b4a5-managed-identity-header",
    ):
        assert secret not in text, f"{secret[:12]}... leaked"
        assert quote(secret, safe="") not in text
    # what is not a secret stays: names of keys, users, lengths a replay needs
    assert '"keyName": "key1"' in text and '"username": "acagpuregistry"' in text
    assert "TOKENIZERS_PARALLELISM=<secret-" in text  # `token` in a key=value: replaced, to be safe
    assert "sha256:" + "ab12" * 16 in text and "AccountName=s;" in text
    # the same key gets the same placeholder wherever it appears (listKeys, the connection string)
    lines = [json.loads(ln) for ln in text.splitlines()]
    placeholder = lines[0]["response_body"]["keys"][0]["value"]
    assert placeholder.startswith("<secret-") and f"AccountKey={placeholder};" in text


def test_an_entropy_judge_tells_keys_from_names() -> None:
    assert recording.looks_random(STORAGE_KEY) and recording.looks_random(WORKSPACE_KEY)
    for name in (
        "usr/local/nvidia/lib64/libcuda/Target3/Linux/x64",
        "ApiSupportedVersions2022Preview20230401",
        "0123456789abcdef" * 4,
        "a" * 60,
    ):
        assert not recording.looks_random(name)


def test_meta_keeps_no_secret_argument(tmp_path: Path) -> None:
    """meta.json's command line: a webhook is left out (a replay posts nowhere), a password replaced
    in both spellings, a variable's name (`--secret-env NAME`) kept."""
    rec = recording.Recorder(tmp_path)
    argv = ["tags", "--password", "hunter22-Zq", "--notify", "https://hooks.slack.com/services/T1/B2/Zr8q",
            "--api-token=tok-Qw9x7", "--secret-env", "MY_TOKEN", "repo/x"]  # fmt: skip
    rec.finish("tags", 0, argv)
    meta = (tmp_path / recording.META_FILE).read_text(encoding="utf-8")
    for secret in ("hunter22-Zq", "hooks.slack.com", "Zr8q", "tok-Qw9x7"):
        assert secret not in meta
    args = json.loads(meta)["argv"]
    assert args[:2] == ["tags", "--password"] and args[2].startswith("<secret-")
    assert args[3].startswith("--api-token=<secret-") and args[4:] == ["--secret-env", "MY_TOKEN", "repo/x"]


def test_identifiers_of_a_subscription_and_a_gpu_board_are_replaced(tmp_path: Path) -> None:
    rec = recording.Recorder(tmp_path)
    verification = "D3F71C85EB6552E36A89A3E4A080C3CFB00181670B659B0003264FC673AA9B00"
    env = {"properties": {"customDomainConfiguration": {"customDomainVerificationId": verification}}}
    rec.exchange("GET", "https://management.azure.com/x", None, 200, {}, json.dumps(env))
    log = "2026-11-27T06:36:02Z stdout F     Serial Number                         : 1650921012345\n"
    log += "2026-11-27T06:36:02Z stdout F     Serial Number                         : N/A"
    rec.exchange("GET", "https://eastus.azurecontainerapps.dev/x/logstream", None, 200, {}, log)
    text = rec.path.read_text(encoding="utf-8")
    assert verification not in text and '"customDomainVerificationId": "<id-1>"' in text
    assert "1650921012345" not in text and ": <serial-1>" in text and ": N/A" in text
