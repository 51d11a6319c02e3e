"""`acagpu down -g GROUP` deletes runs only. Given a warm environment's group it deleted the
environment (and its registry, share and any run inside) past `env delete`'s in-use check; given
the guard's, the group without the guard's role assignment. Both are refused by name (exit 2),
with the command that removes each, and stay."""

from __future__ import annotations

import json

from click.testing import CliRunner

from aca_gpu.cli import cli
from tests.e2e.serving import emulator_get


def test_down_refuses_a_warm_environment_and_the_guard(emu: object) -> None:
    made = CliRunner().invoke(cli, ["env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes"])
    assert made.exit_code == 0, made.output
    installed = CliRunner().invoke(cli, ["guard", "install", "-l", "eastus", "--yes"])
    assert installed.exit_code == 0, installed.output
    for group, said, hint in [
        ("rg-acagpu-env-lab", "is warm environment lab, not a run", "acagpu env delete lab --yes"),
        ("rg-acagpu-guard", "holds the guard, not a run", "acagpu guard uninstall --yes"),
    ]:
        done = CliRunner().invoke(cli, ["down", "-g", group, "--yes", "-o", "json"])
        assert done.exit_code == 2, done.output
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "NotARun" and said in error["message"] and hint in error["hint"], error
    groups = {
        g["name"]: g["deleting"] for g in emulator_get(dict(emu.client_env()), "inventory")["resource_groups"]
    }  # type: ignore[attr-defined]
    assert groups == {"rg-acagpu-env-lab": False, "rg-acagpu-guard": False}, groups
