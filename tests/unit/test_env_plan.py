"""`acagpu env create` and `--env` refuse bad input before any cloud call (exit 2, nothing made)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.naming import renewed_env_tags, validate_env_name
from aca_gpu.workflow.engine.plan import UpRequest, make_up_plan
from aca_gpu.workflow.env import lifecycle


@pytest.mark.parametrize("name", ["Lab", "1lab", "lab-", "la--b", "", "a" * 21, "lab_1"])
def test_bad_environment_names_are_refused(name: str) -> None:
    with pytest.raises(BadInput):
        validate_env_name(name)


def test_a_warm_environment_takes_serverless_gpus_only() -> None:
    with pytest.raises(BadInput, match="dedicated"):
        lifecycle.make_env_plan(
            Settings(), "lab", location="eastus", gpus="t4,nc24-a100", idle_ttl=None, owner="o"
        )
    plan = lifecycle.make_env_plan(
        Settings(), "lab", location="eastus", gpus="T4, a100", idle_ttl="12h", owner="o"
    )
    assert plan.profiles() == [
        ("gpu-t4", "Consumption-GPU-NC8as-T4"),
        ("gpu-a100", "Consumption-GPU-NC24-A100"),
    ]
    tags = plan.tags()
    assert tags["acagpu:kind"] == "env" and tags["acagpu:idle-ttl"] == str(12 * 3600)
    renewed = renewed_env_tags(tags)
    assert (
        renewed["acagpu:expires-at"] >= tags["acagpu:expires-at"]
        and renewed["acagpu:created-at"] == tags["acagpu:created-at"]
    )


def test_env_comes_from_the_setting_and_refuses_keep() -> None:
    plan = make_up_plan(Settings(env="lab"), UpRequest(run_id="r1"), owner="o")
    assert plan.env == "lab" and plan.as_dict()["resources"]["environment_group"] == "rg-acagpu-env-lab"
    with pytest.raises(BadInput, match="--keep"):
        make_up_plan(Settings(), UpRequest(env="lab", keep=True), owner="o")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--env", "lab", "-l", "eastus"], "cannot be used together"),
        (["up", "--env", "lab", "--keep"], "cannot be used together"),
        (
            ["validate", "--env", "lab", "--regions", "eastus,westus3", "--image", "x", "--gpu", "t4"],
            "together",
        ),
        (["env", "create", "Bad_Name", "--yes"], "invalid environment name"),
        (["env", "create", "lab", "--idle-ttl", "soon", "--yes"], "--idle-ttl"),
        (["env", "create", "lab", "--gpu", "nc24-a100", "--yes"], "dedicated"),
        (["test", "--gpu", "t4"], "only applies with --env"),
    ],
)
def test_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        cli, args, env={"ACAGPU_SUBSCRIPTION": "00000000-0000-0000-0000-000000000000"}
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr


def test_env_list_columns_stay_aligned_for_a_long_state_or_name() -> None:
    """`scheduledfordelete` (ARM's state while the environment is deleted) and a long name pushed
    the rest of their row right of the header's columns."""
    import io

    from aca_gpu.cli.env import _render

    docs = [
        {
            "name": name,
            "state": state,
            "location": "eastus",
            "profiles": [{"type": "Consumption-GPU-NC8as-T4"}],
        }
        for name, state in (("lab", "idle"), ("lab2", "scheduledfordelete"), ("a-very-long-env-name", "busy"))
    ]
    stream = io.StringIO()
    _render(docs)(stream)
    header, *rows = stream.getvalue().splitlines()[:4]
    for row in rows:
        assert row.index("eastus") == header.index("REGION"), (header, row)
        assert row.index("Consumption-GPU") == header.index("GPU PROFILES"), (header, row)
