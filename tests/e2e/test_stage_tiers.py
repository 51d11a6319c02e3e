"""docs/staging.md top to bottom against the session's emulator (real HTTPS, the real SDK), the CLI
as a script runs it: no terminal on stdin.

Before: `image stage A B --env lab` then `image stage A --env lab --sku Premium --stream` made the
registry Premium without a word and forgot B (`env show` listed A alone, so the next `up --env`
pulled B from Docker Hub); a later default stage turned Premium back into Standard; `image stage`
and `test --env` created billable resources from a script without `--yes`; and `env list`, `env
show` and `status` said "$0.00/h idle" for an environment whose registry bills every day.
"""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from aca_gpu.cli import cli

TORCH = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
CUDA = "nvidia/cuda:12.1.1-base-ubuntu22.04"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))  # stdin is no terminal, as in a script


def _doc(done: Result) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _registry_sku() -> str | None:
    """The environment's registry's tier as ARM says it; None when there is no registry."""
    from aca_gpu.azure import acr_registry
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.env.staging.catalogue import registry_name

    clients: Any = open_cloud(load_settings()).clients  # type: ignore[attr-defined]
    reg = acr_registry.get_registry(
        clients, "rg-acagpu-env-lab", registry_name(clients.subscription_id, "lab")
    )
    return None if reg is None else reg.sku


def _staged() -> tuple[str, list[str], float]:
    """(the registry's tier, the images `env show` lists as staged, its idle cost per day)."""
    shown = _doc(_run("env", "show", "lab", "-o", "json"))
    staged = shown.get("staged") or {}
    images = [i["image"].removeprefix("docker.io/") for i in staged.get("images") or []]
    return str(staged.get("sku")), images, shown["idle_cost"]["usd_per_day"]


def test_staging_adds_keeps_the_tier_and_asks_before_billing(emu: Any) -> None:
    made = _run("env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
    assert made.exit_code == 0, made.stderr
    stage = ("image", "stage", "--env", "lab", "--no-inspect", "-o", "json")

    # a script without --yes: refused, exit 2, no registry
    refused = _run(*stage, TORCH, CUDA)
    assert refused.exit_code == 2, refused.stderr
    assert "without --yes" in _doc(refused)["error"]["message"], refused.stdout
    # the refusal comes before any step line ("✗ registry ..." was printed above it), in the words
    # every command says the --yes rule in
    refused = _run("image", "stage", "--env", "lab", "--no-inspect", TORCH)
    assert refused.exit_code == 2 and refused.stdout == "", refused.stdout
    assert refused.stderr.splitlines() == [
        "error: not staging images in environment lab without --yes: stdin is not a terminal, so nobody "
        "can confirm",
        "hint: add --yes to go ahead without a question",
    ], refused.stderr
    assert _registry_sku() is None

    first = _doc(_run(*stage, TORCH, CUDA, "--yes"))
    assert first["sku"] == "Standard" and len(first["images"]) == 2, first

    # what an idle environment holding a Standard registry costs: its daily fee, in every view
    (listed,) = _doc(_run("env", "list", "-o", "json"))["environments"]
    idle = listed["idle_cost"]
    assert idle["registry"]["meter"] == "Standard Registry Unit", idle
    assert idle["usd_per_day"] == 0.67 and idle["usd_per_hour"] > 0, idle
    assert "$0.67/day idle" in _run("env", "list").stdout
    assert "$0.67/day idle" in _run("env", "show", "lab").stdout
    assert "$0.67/day idle" in _run("status").stdout

    # another tier is a change, asked first: refused from a script, the registry untouched
    premium = ("--sku", "Premium", "--stream")
    asked = _run(*stage, TORCH, *premium)
    assert asked.exit_code == 2, asked.stderr
    assert _staged() == ("Standard", sorted([CUDA, TORCH]), 0.67)

    changed = _doc(_run(*stage, TORCH, *premium, "--yes"))
    assert changed["sku"] == "Premium", changed
    assert any("Standard -> Premium" in c for c in changed["changed"]), changed
    by_image = {i["image"].removeprefix("docker.io/"): i for i in changed["images"]}
    assert set(by_image) == {CUDA, TORCH}, changed  # B is still staged
    assert by_image[TORCH]["streaming"] == "converted" and by_image[CUDA]["streaming"] == "off"
    assert _staged() == ("Premium", sorted([CUDA, TORCH]), 1.67)

    # a default stage keeps the tier it finds (no silent downgrade that would end streaming)
    again = _doc(_run(*stage, CUDA, "--yes"))
    assert again["sku"] == "Premium" and again["changed"] == [], again
    assert _registry_sku() == "Premium"

    # `test --env` makes a GPU job: from a script it needs --yes too
    tested = _run("test", "--env", "lab", "-o", "json")
    assert tested.exit_code == 2 and "without --yes" in tested.stdout, tested.stdout
    assert emu.inventory()["jobs"] == []  # nothing made
