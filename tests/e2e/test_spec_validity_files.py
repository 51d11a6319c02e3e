"""Every Azure Files request acagpu sends for a fan-out's results (shard folders made before the
starts, `download_tree` after) is an operation of the File service's data-plane spec, with the query
parameters that operation takes and its required headers, at the spec version the SDK names.

Facts from Azure/azure-rest-api-specs specification/storage/data-plane/Microsoft.FileStorage/stable/
2026-10-06/file.json (`x-ms-paths` keys and their parameters); the emulator serves the same subset
(aca_gpu/emulator/dataplane/files.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from azure.core.pipeline.transport import RequestsTransport

from aca_gpu.azure.fileshare import download_tree, share_client
from aca_gpu.emulator.server import EmulatorServer

SPEC_VERSIONS = ("2026-10-06",)  # the spec files this table was read from
# (method, restype, comp, file path?) -> (operationId, query parameters it takes, required headers)
OPERATIONS: dict[tuple[str, str | None, str | None, bool], tuple[str, set[str], set[str]]] = {
    ("GET", "share", None, False): ("Share_GetProperties", {"restype", "sharesnapshot", "timeout"}, set()),
    ("PUT", "directory", None, False): ("Directory_Create", {"restype", "timeout"}, set()),
    ("GET", "directory", None, False): (
        "Directory_GetProperties",
        {"restype", "sharesnapshot", "timeout"},
        set(),
    ),
    ("DELETE", "directory", None, False): ("Directory_Delete", {"restype", "timeout"}, set()),
    ("GET", "directory", "list", False): (
        "Directory_ListFilesAndDirectoriesSegment",
        {"restype", "comp", "prefix", "sharesnapshot", "marker", "maxresults", "timeout", "include"},
        set(),
    ),
    ("GET", None, None, True): ("File_Download", {"timeout"}, set()),
    ("HEAD", None, None, True): ("File_GetProperties", {"sharesnapshot", "timeout"}, set()),
    ("PUT", None, None, True): ("File_Create", {"timeout"}, {"x-ms-content-length", "x-ms-type"}),
    ("PUT", None, "range", True): ("File_UploadRange", {"comp", "timeout"}, {"x-ms-range", "x-ms-write"}),
    ("DELETE", None, None, True): ("File_Delete", {"timeout"}, set()),
}
Sent = tuple[str, str, dict[str, str]]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Sent]]:
    seen: list[Sent] = []
    real = RequestsTransport.send

    def recording(self: RequestsTransport, request: Any, **kwargs: Any) -> Any:
        seen.append((request.method, request.url, {k.lower(): v for k, v in request.headers.items()}))
        return real(self, request, **kwargs)

    monkeypatch.setattr(RequestsTransport, "send", recording)
    yield seen


def check(account: str, share: str, requests_: list[Sent], is_file: set[str]) -> tuple[list[str], set[str]]:
    """Problems, and the operations seen. `is_file`: the share paths that name files."""
    problems: list[str] = []
    seen: set[str] = set()
    for method, url, headers in requests_:
        parts = urlsplit(url)
        segments = parts.path.strip("/").split("/")
        if segments[:2] != [account, share]:
            problems.append(f"{method} {parts.path}: not under /{account}/{share}")
            continue
        inner = "/".join(segments[2:])
        query = dict(parse_qsl(parts.query))
        key = (method, query.get("restype"), query.get("comp"), inner in is_file)
        if key not in OPERATIONS:
            problems.append(f"{method} {parts.path}?{parts.query}: no such operation in the spec table")
            continue
        operation, allowed, required = OPERATIONS[key]
        seen.add(operation)
        if headers.get("x-ms-version") not in SPEC_VERSIONS:
            problems.append(
                f"{operation}: x-ms-version {headers.get('x-ms-version')!r} is not {SPEC_VERSIONS}"
            )
        extra = set(query) - allowed
        if extra:
            problems.append(f"{operation}: query parameters the operation does not take: {sorted(extra)}")
        missing = required - set(headers)
        if missing:
            problems.append(f"{operation}: required headers missing: {sorted(missing)}")
        if not headers.get("authorization", "").startswith(f"SharedKey {account}:"):
            problems.append(f"{operation}: not signed with the account's SharedKey")
    return problems, seen


def _arm(server: EmulatorServer, method: str, path: str, body: Any = None) -> requests.Response:
    return requests.request(
        method,
        f"{server.endpoint}/subscriptions/{server.subscription}{path}",
        params={"api-version": "2025-06-01" if "Storage" in path else "2024-11-01"},
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
        verify=server.ca_bundle,
        timeout=30,
    )


def test_results_requests_are_file_service_spec_operations(sent: list[Sent], tmp_path: Path) -> None:
    with EmulatorServer(time_scale=0.002, registered=True) as server:
        account, share = "acagpuspec0123", "results"
        assert _arm(server, "PUT", "/resourcegroups/rg-spec", {"location": "eastus"}).ok
        server.ctx.state.provider("Microsoft.Storage").state = "Registered"  # type: ignore[union-attr]
        base = f"/resourceGroups/rg-spec/providers/Microsoft.Storage/storageAccounts/{account}"
        made = _arm(
            server, "PUT", base, {"location": "eastus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}
        )
        assert made.status_code in (200, 202), made.text
        _wait_account(server, base)
        assert _arm(server, "PUT", f"{base}/fileServices/default/shares/{share}", {"properties": {}}).ok
        key = _arm(server, "POST", f"{base}/listKeys").json()["keys"][0]["value"]
        endpoint = _arm(server, "GET", base).json()["properties"]["primaryEndpoints"]["file"]
        sent.clear()  # from here on: the File service only

        client = share_client(account, key, share, endpoint=endpoint, verify=server.ca_bundle)
        client.get_share_properties()
        for folder in ("run", "run/0", "run/1"):  # a client makes each shard's folder before its start
            client.create_directory(folder)
        client.get_file_client("run/0/i.txt").upload_file(b"0\n")  # standing for what a shard wrote
        client.get_file_client("run/1/i.txt").upload_file(b"1\n")
        written = download_tree(
            account, key, share, "run", tmp_path, endpoint=endpoint, verify=server.ca_bundle
        )
        assert [p.read_text() for p in written.written] == ["0\n", "1\n"]
        client.get_file_client("run/1/i.txt").get_file_properties()
        client.get_file_client("run/1/i.txt").delete_file()
        client.get_directory_client("run/1").delete_directory()
        client.get_directory_client("run/0").get_directory_properties()

    problems, seen = check(account, share, sent, {"run/0/i.txt", "run/1/i.txt"})
    assert not problems, "\n".join(problems)
    assert {op for op, _, _ in OPERATIONS.values()} - seen == set(), seen  # every one exercised


def _wait_account(server: EmulatorServer, base: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if _arm(server, "GET", base).json()["properties"]["provisioningState"] == "Succeeded":
            return
        time.sleep(0.02)
    raise AssertionError("the storage account was not made")


def test_the_checker_catches_an_operation_outside_the_table() -> None:
    bad: list[Sent] = [
        ("GET", "https://h/acct/sh/dir?restype=directory&comp=list&bogus=1", {"x-ms-version": "2026-10-06"}),
        ("POST", "https://h/acct/sh/f", {"x-ms-version": "2026-10-06", "authorization": "SharedKey acct:x"}),
        ("PUT", "https://h/acct/sh/f", {"x-ms-version": "2020-01-01", "authorization": "SharedKey acct:x"}),
    ]
    problems, _ = check("acct", "sh", bad, {"f"})
    assert any("bogus" in p for p in problems)
    assert any("not signed" in p for p in problems)
    assert any("no such operation" in p for p in problems)
    assert any("x-ms-version '2020-01-01'" in p for p in problems)
    assert any("x-ms-content-length" in p for p in problems)
