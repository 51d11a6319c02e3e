"""The emulator's Azure Files data plane through the real Azure SDK for File Shares
(azure-storage-file-share) and acagpu's `download_tree`: the account's `primaryEndpoints.file`
points at the emulator, SharedKey signatures are checked, listing pages with NextMarker, ranges
download, and what a job's container wrote to its mounted share is what comes back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.mgmt.appcontainers import ContainerAppsAPIClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.storage import StorageManagementClient
from azure.storage.fileshare import (
    AccountSasPermissions,
    ResourceTypes,
    ShareSasPermissions,
    generate_account_sas,
    generate_share_sas,
)

from aca_gpu.azure.fileshare import download_tree, share_client
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.errors import InfraError
from tests.emulator.helpers import POLL, StaticCredential, env_id, make_env, make_rg, wait_for
from tests.local.conftest import podman, test_image  # noqa: F401  (fixtures)

ACCOUNT = "acagpufiles0123"
SHARE = "results"


@pytest.fixture
def storage(server: EmulatorServer) -> StorageManagementClient:
    kwargs: dict[str, Any] = {
        "base_url": server.endpoint,
        "connection_verify": server.ca_bundle,
        "polling_interval": POLL,
        "retry_backoff_factor": 0.01,
    }
    return StorageManagementClient(StaticCredential(server.token), server.subscription, **kwargs)


def _account(arm: ResourceManagementClient, storage: StorageManagementClient) -> tuple[str, str]:
    """(primaryEndpoints.file, key) of a fresh account with the share."""
    make_rg(arm, "rg-files")
    body = {"location": "eastus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}
    storage.storage_accounts.begin_create("rg-files", ACCOUNT, body).result()
    storage.file_shares.create("rg-files", ACCOUNT, SHARE, {"properties": {"shareQuota": 100}})
    endpoint = storage.storage_accounts.get_properties("rg-files", ACCOUNT).primary_endpoints.file
    key = storage.storage_accounts.list_keys("rg-files", ACCOUNT).as_dict()["keys"][0]["value"]
    return endpoint, key


def test_the_account_file_endpoint_is_the_emulator_and_a_tree_comes_back_as_written(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer, tmp_path: Path
) -> None:
    endpoint, key = _account(arm, storage)
    assert endpoint == f"{server.endpoint}/{ACCOUNT}/"
    share = share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    share.create_directory("run1")
    for shard in range(3):
        share.create_directory(f"run1/{shard}")
        share.get_file_client(f"run1/{shard}/i.txt").upload_file(f"{shard}\n".encode())
    share.create_directory("run1/2/deep")
    big = bytes(range(256)) * 40_000  # 10 MB: downloaded in ranges by the SDK's chunked reader
    share.get_file_client("run1/2/deep/big.bin").upload_file(big)
    share.get_file_client("run1/2/empty").upload_file(b"")
    share.create_directory("other")
    share.get_file_client("other/x").upload_file(b"not this run")

    written = download_tree(
        ACCOUNT, key, SHARE, "run1", tmp_path / "out", endpoint=endpoint, verify=server.ca_bundle
    )
    out = tmp_path / "out"
    assert [p.relative_to(out).as_posix() for p in written.written] == [
        "0/i.txt", "1/i.txt", "2/deep/big.bin", "2/empty", "2/i.txt"
    ]  # fmt: skip
    assert [(out / f"{s}/i.txt").read_text() for s in range(3)] == ["0\n", "1\n", "2\n"]
    assert (out / "2/deep/big.bin").read_bytes() == big and (out / "2/empty").read_bytes() == b""

    # a range, as `download_file(offset, length)` asks for it
    part = share.get_file_client("run1/2/deep/big.bin").download_file(offset=1000, length=10).readall()
    assert part == big[1000:1010]
    props = share.get_file_client("run1/2/deep/big.bin").get_file_properties()
    assert props.size == len(big)
    # a folder nobody wrote is an empty result, not an error
    assert download_tree(ACCOUNT, key, SHARE, "run1/9", tmp_path / "none", endpoint=endpoint,
                         verify=server.ca_bundle).written == ()  # fmt: skip


def test_listing_pages_with_next_marker(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer
) -> None:
    endpoint, key = _account(arm, storage)
    share = share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    share.create_directory("many")
    for i in range(7):
        share.get_file_client(f"many/f{i}").upload_file(b"x")
    pages = share.get_directory_client("many").list_directories_and_files(results_per_page=3).by_page()
    seen = [[e["name"] for e in page] for page in pages]
    assert seen == [["f0", "f1", "f2"], ["f3", "f4", "f5"], ["f6"]]
    named = share.get_directory_client("many").list_directories_and_files(name_starts_with="f5")
    assert [e["name"] for e in named] == ["f5"]


def test_a_wrong_key_or_another_account_is_refused_and_missing_paths_say_so(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer, tmp_path: Path
) -> None:
    endpoint, key = _account(arm, storage)
    wrong = key[:-8] + ("A" * 7 if not key.endswith("A" * 7 + "=") else "B" * 7) + "="
    refused = share_client(ACCOUNT, wrong, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    with pytest.raises(ClientAuthenticationError) as caught:
        list(refused.list_directories_and_files())
    assert caught.value.error_code == "AuthenticationFailed"
    with pytest.raises(InfraError):
        download_tree(ACCOUNT, wrong, SHARE, "", tmp_path, endpoint=endpoint, verify=server.ca_bundle)

    right = share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    with pytest.raises(ResourceNotFoundError) as missing:
        right.get_file_client("nope/x").download_file()
    assert missing.value.error_code == "ParentNotFound"
    nosuch = share_client(ACCOUNT, key, "noshare", endpoint=endpoint, verify=server.ca_bundle)
    with pytest.raises(HttpResponseError) as no_share:
        list(nosuch.list_directories_and_files())
    assert no_share.value.error_code == "ShareNotFound"
    with pytest.raises(HttpResponseError):  # the share's root is not a place to climb out of
        right.get_file_client("../../etc/passwd").download_file()


ISSUE_LINE = 'echo $ACAGPU_SHARD_INDEX > "$ACAGPU_OUTPUT_DIR/i.txt"; [ "$ACAGPU_SHARD_INDEX" != 7 ] || exit 3'


def _shards_write(
    aca: ContainerAppsAPIClient,
    server: EmulatorServer,
    key: str,
    endpoint: str,
    image: str,
    shards: list[int],
) -> list[dict[str, Any]]:
    """A job mounting the share at /out; one execution per shard running ISSUE_LINE with its own
    ACAGPU_OUTPUT_DIR (made on the share before its start, as a client does); each one's properties."""
    make_env(aca)
    azure_file = {"accountName": ACCOUNT, "accountKey": key, "shareName": SHARE, "accessMode": "ReadWrite"}
    aca.managed_environments_storages.create_or_update(
        "rg-acagpu-t1", "cae-acagpu-t1", "out", {"properties": {"azureFile": azure_file}}
    )
    share = share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    for folder in ["r1"] + [f"r1/{i}" for i in shards]:
        share.create_directory(folder)
    container = {"name": "main", "image": image, "command": ["sh", "-c", ISSUE_LINE],
                 "resources": {"cpu": 0.5, "memory": "1Gi"},
                 "volumeMounts": [{"volumeName": "out", "mountPath": "/out"}]}  # fmt: skip
    job = {
        "location": "eastus",
        "properties": {
            "environmentId": env_id(server.subscription, "rg-acagpu-t1", "cae-acagpu-t1"),
            "configuration": {
                "triggerType": "Manual",
                "replicaTimeout": 86400,
                "replicaRetryLimit": 0,
                "manualTriggerConfig": {"parallelism": 1, "replicaCompletionCount": 1},
            },
            "template": {
                "containers": [container],
                "volumes": [{"name": "out", "storageType": "AzureFile", "storageName": "out"}],
            },
        },
    }
    aca.jobs.begin_create_or_update("rg-acagpu-t1", "fan", job).result()  # type: ignore[call-overload]
    names = []
    for shard in shards:
        env = [{"name": "ACAGPU_SHARD_INDEX", "value": str(shard)},
               {"name": "ACAGPU_OUTPUT_DIR", "value": f"/out/r1/{shard}"}]  # fmt: skip
        override = {"containers": [{**container, "env": env}]}
        started = aca.jobs.begin_start("rg-acagpu-t1", "fan", template=override).result()  # type: ignore[call-overload]
        names.append(started.name)

    def done() -> Any:
        found = [aca.job_execution("rg-acagpu-t1", "fan", n).as_dict()["properties"] for n in names]
        return all(f["status"] in ("Succeeded", "Failed") for f in found) and found

    ended: list[dict[str, Any]] = wait_for(done, timeout=60, what="the executions ended")
    return ended


def test_a_shell_line_without_podman_writes_to_the_share_folder_its_mount_names(
    arm: ResourceManagementClient,
    aca: ContainerAppsAPIClient,
    storage: StorageManagementClient,
    server: EmulatorServer,
    tmp_path: Path,
) -> None:
    """busybox is not in this machine's Podman storage: the line runs in the sandbox, the mount path in
    its env pointing at the share's folder."""
    endpoint, key = _account(arm, storage)
    make_rg(arm)
    found = _shards_write(aca, server, key, endpoint, "busybox:1.36", [6, 7])
    assert [f["status"] for f in found] == ["Succeeded", "Failed"], [f.get("reason") for f in found]
    written = download_tree(ACCOUNT, key, SHARE, "r1", tmp_path, endpoint=endpoint, verify=server.ca_bundle)
    assert [(p.relative_to(tmp_path).as_posix(), p.read_text()) for p in written.written] == [
        ("6/i.txt", "6\n"), ("7/i.txt", "7\n")
    ]  # fmt: skip


def test_what_a_job_container_writes_to_its_mount_is_what_download_tree_brings_back(
    arm: ResourceManagementClient,
    aca: ContainerAppsAPIClient,
    storage: StorageManagementClient,
    server: EmulatorServer,
    tmp_path: Path,
    test_image: str,  # noqa: F811
) -> None:
    endpoint, key = _account(arm, storage)
    make_rg(arm)
    found = _shards_write(aca, server, key, endpoint, test_image, [0, 7])
    assert [f["status"] for f in found] == ["Succeeded", "Failed"], [f.get("reason") for f in found]
    written = download_tree(ACCOUNT, key, SHARE, "r1", tmp_path, endpoint=endpoint, verify=server.ca_bundle)
    assert [(p.relative_to(tmp_path).as_posix(), p.read_text()) for p in written.written] == [
        ("0/i.txt", "0\n"), ("7/i.txt", "7\n")
    ]  # fmt: skip


def test_a_new_account_of_a_deleted_ones_name_starts_with_an_empty_share(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer, tmp_path: Path
) -> None:
    endpoint, key = _account(arm, storage)
    share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle).get_file_client(
        "left.txt"
    ).upload_file(b"from the first account")
    arm.resource_groups.begin_delete("rg-files").result()  # the group takes its account and shares
    endpoint, key = _account(arm, storage)
    got = download_tree(ACCOUNT, key, SHARE, "", tmp_path, endpoint=endpoint, verify=server.ca_bundle)
    assert got.written == ()


def test_a_share_sas_reads_and_lists_within_its_permissions_and_window(
    arm: ResourceManagementClient, storage: StorageManagementClient, server: EmulatorServer, tmp_path: Path
) -> None:
    endpoint, key = _account(arm, storage)
    owner = share_client(ACCOUNT, key, SHARE, endpoint=endpoint, verify=server.ca_bundle)
    owner.create_directory("r1")
    owner.get_file_client("r1/i.txt").upload_file(b"7\n")
    soon = datetime.now(UTC) + timedelta(hours=1)
    read_list = generate_share_sas(
        ACCOUNT, SHARE, key, permission=ShareSasPermissions(read=True, list=True), expiry=soon
    )
    written = download_tree(
        ACCOUNT, "", SHARE, "r1", tmp_path, endpoint=endpoint, verify=server.ca_bundle, sas=read_list
    )
    assert [p.read_text() for p in written.written] == ["7\n"]

    reader = share_client(ACCOUNT, "", SHARE, endpoint=endpoint, verify=server.ca_bundle, sas=read_list)
    with pytest.raises(HttpResponseError) as no_write:  # a permission the SAS does not give
        reader.get_file_client("r1/new.txt").upload_file(b"x")
    assert no_write.value.error_code == "AuthorizationPermissionMismatch"
    expired = generate_share_sas(
        ACCOUNT, SHARE, key, permission=ShareSasPermissions(read=True, list=True),
        expiry=datetime.now(UTC) - timedelta(minutes=1),
    )  # fmt: skip
    with pytest.raises(ClientAuthenticationError) as late:
        list(share_client(ACCOUNT, "", SHARE, endpoint=endpoint, verify=server.ca_bundle, sas=expired)
             .list_directories_and_files())  # fmt: skip
    assert late.value.error_code == "AuthenticationFailed"
    forged = read_list.replace("sp=rl", "sp=rwdl")  # more permission than was signed
    with pytest.raises(ClientAuthenticationError):
        list(share_client(ACCOUNT, "", SHARE, endpoint=endpoint, verify=server.ca_bundle, sas=forged)
             .list_directories_and_files())  # fmt: skip

    everything = generate_account_sas(
        ACCOUNT, key, ResourceTypes(container=True, object=True),
        AccountSasPermissions(read=True, list=True, write=True, create=True), expiry=soon,
    )  # fmt: skip
    writer = share_client(ACCOUNT, "", SHARE, endpoint=endpoint, verify=server.ca_bundle, sas=everything)
    writer.get_file_client("r1/by-account-sas.txt").upload_file(b"ok")
    assert owner.get_file_client("r1/by-account-sas.txt").download_file().readall() == b"ok"
