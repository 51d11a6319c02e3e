"""`run --create-share`: the storage account's name, the refusals before anything exists, the dry
run's plan, and `shares.ensure` making only what a (fake) cloud lacks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.models import ShareMount, StorageAccountInfo
from aca_gpu.workflow.env import shares
from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

SUB = "6f1d3b2a-5c4e-4a8b-9d0f-1e2a3b4c5d6e"
VALID = re.compile(r"^[a-z0-9]{3,24}$")


def test_the_account_name_is_valid_deterministic_and_apart_per_subscription() -> None:
    name = shares.account_name(SUB, "lab")
    assert VALID.match(name) and name.startswith("acagpulab")
    assert shares.account_name(SUB.upper(), "lab") == name  # found again by every run
    assert shares.account_name("00000000-0000-0000-0000-000000000000", "lab") != name
    assert shares.account_name(SUB, "lab2") != name
    long = shares.account_name(SUB, "a-very-long-environment-name-1")
    assert VALID.match(long) and len(long) == 24


def _spec(**extra: Any) -> Any:
    return make_run_spec(
        Settings(subscription=SUB), RunRequest(image="busybox", run_id="sh1", **extra), owner="me"
    )


def test_a_cold_run_is_refused_because_its_group_and_files_go_after_the_run() -> None:
    with pytest.raises(BadInput) as cold:
        _spec(mounts=("data:/data",), create_share=True)
    assert "--env" in cold.value.message and "lost" in cold.value.message
    assert cold.value.hint is not None and "acagpu env create" in cold.value.hint


@pytest.mark.parametrize(
    ("mounts", "said"),
    [((), "add --mount SHARE:/path"), (("ab:/d",), "3-32 lowercase"), (("a--b:/d",), "single hyphens")],
)
def test_bad_share_input_is_refused(mounts: tuple[str, ...], said: str) -> None:
    with pytest.raises(BadInput) as bad:
        _spec(env_name="lab", mounts=mounts, create_share=True)
    assert said in bad.value.message


def test_the_dry_run_says_what_would_be_made_and_where_it_stays() -> None:
    doc = _spec(env_name="lab", mounts=("data:/data",), create_share=True).as_dict()["create_share"]
    assert doc["storage_account"] == shares.account_name(SUB, "lab")
    assert (doc["resource_group"], doc["sku"], doc["only_if_missing"]) == (
        "rg-acagpu-env-lab",
        "Standard_LRS",
        True,
    )
    assert doc["shares"] == [{"name": "data", "quota_gib": 100, "access_mode": "ReadWrite"}]
    assert "acagpu env delete lab" in doc["kept_with"]
    assert "create_share" not in _spec(env_name="lab", mounts=("data:/data",)).as_dict()
    local = _spec(runtime="podman", create_share=True)
    assert not local.create_share and any("--create-share" in w for w in local.warnings)


def test_the_cli_refuses_a_cold_create_share_with_exit_2() -> None:
    result = CliRunner().invoke(
        cli, ["run", "--mount", "data:/data", "--create-share", "--dry-run", "busybox"]
    )
    assert result.exit_code == 2, result.output
    assert "cold run's resource group is deleted after the run" in result.output + result.stderr


class FakeStorage:
    """Just the Cloud methods `ensure` calls, recording each write."""

    subscription_id = SUB

    def __init__(self) -> None:
        self.accounts: dict[str, StorageAccountInfo] = {}
        self.shares: set[str] = set()
        self.storages: set[str] = set()
        self.writes: list[str] = []

    def get_storage_account(self, resource_group: str, name: str) -> StorageAccountInfo | None:
        return self.accounts.get(name)

    def create_storage_account(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> StorageAccountInfo:
        self.writes.append(f"account {name} {location} {sorted(tags)}")
        self.accounts[name] = StorageAccountInfo(name, resource_group, location, tags, "Succeeded")
        return self.accounts[name]

    def environment_storages(self, resource_group: str, environment: str) -> list[str]:
        return sorted(self.storages)

    def file_share_exists(self, resource_group: str, account: str, share: str) -> bool:
        return share in self.shares

    def create_file_share(self, resource_group: str, account: str, share: str, quota_gib: int) -> None:
        self.writes.append(f"share {share} {quota_gib}")
        self.shares.add(share)

    def set_environment_file_storage(
        self, resource_group: str, environment: str, storage_name: str, mount: ShareMount
    ) -> None:
        self.writes.append(f"storage {storage_name} {mount.account} {mount.share}")
        self.storages.add(storage_name)


def _ensure(cloud: FakeStorage) -> shares.Made:
    return shares.ensure(
        cloud,  # type: ignore[arg-type]
        env_name="lab",
        resource_group="rg-acagpu-env-lab",
        environment="cae-acagpu-env-lab",
        location="eastus",
        group_tags={
            "acagpu:env": "lab",
            "acagpu:expires-at": "2030-01-01T00:00:00Z",
            "acagpu:last-used": "x",
        },
        shares=["data", "data"],
    )


def test_ensure_reads_first_and_makes_only_what_is_missing() -> None:
    cloud = FakeStorage()
    account = shares.account_name(SUB, "lab")
    assert _ensure(cloud).created == [
        f"storage account {account}",
        "file share data",
        "environment storage data",
    ]
    assert cloud.writes == [
        f"account {account} eastus ['acagpu:env', 'acagpu:managed']",  # no expiry: it lives with the group
        "share data 100",
        f"storage data {account} data",
    ]
    assert _ensure(cloud).created == [] and len(cloud.writes) == 3
    cloud.storages.clear()  # someone removed the environment storage: only it is made again
    assert _ensure(cloud).created == ["environment storage data"]
