"""`acagpu run`: the plan (price per second, ceiling, names) and bad input refused before anything."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli

SECRET = "never-print-this-value"


def acagpu(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_dry_run_states_the_price_per_second_and_the_ceiling_and_no_secret() -> None:
    result = acagpu(
        "run", "--dry-run", "-o", "json", "--gpu", "t4", "--max-minutes", "10", "--run-id", "plan1",
        "-e", "MODEL=llama", "--secret-env", "HF_TOKEN", "--cpu", "4", "--memory", "28Gi",
        "nvidia/cuda:12.4.1-base-ubuntu22.04", "--", "nvidia-smi", "-L",
        env={"HF_TOKEN": SECRET},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    doc = json.loads(result.stdout)
    assert (doc["command"], doc["status"], doc["runtime"]) == ("run", "planned", "aca")
    assert doc["workload"]["command"] == ["nvidia-smi", "-L"]
    assert doc["workload"]["secret_env"] == ["HF_TOKEN"] and doc["workload"]["env"] == {"MODEL": "llama"}
    assert (doc["workload"]["cpu"], doc["workload"]["memory"]) == (4.0, "28Gi")
    assert doc["resources"] == {"resource_group": "rg-acagpu-plan1", "environment": "cae-acagpu-plan1",
                                "job": "run-plan1"}  # fmt: skip
    price = doc["price"]
    assert price["usd_per_second"] > 0
    assert price["ceiling_usd"] == pytest.approx(price["usd_per_second"] * 600, rel=1e-3)
    # a smaller replica costs less than the whole T4 replica
    whole = json.loads(acagpu("run", "--dry-run", "-o", "json", "--gpu", "t4", "busybox").stdout)["price"]
    assert whole["usd_per_second"] > price["usd_per_second"]
    assert doc["tags"]["acagpu:run-id"] == "plan1" and "acagpu:expires-at" in doc["tags"]


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["-e", "NOEQUALS"], {}, "expected KEY=VALUE"),
        (["-e", "A=1", "-e", "A=2"], {}, "-e A is given twice"),
        (["--secret-env", "MISSING_ONE"], {}, "MISSING_ONE is not set"),
        (["-e", "TOK=1", "--secret-env", "TOK"], {"TOK": "x"}, "both -e and --secret-env"),
        (["--gpu", "t4", "--cpu", "64"], {}, "gives a container up to"),
        (["--memory", "lots"], {}, "give GiB like 16Gi"),
        (["--registry-username", "me"], {}, "only applies with --registry-password-env"),
        (["--max-minutes", "0"], {}, "--max-minutes"),
        (["--gpu", "nosuchgpu"], {}, "nosuchgpu"),
        (["--mount", "datasets:/data"], {}, "needs --env NAME"),
        (["--env", "lab", "--mount", "datasets:data"], {}, "must be absolute"),
        (["--env", "lab", "--mount", "datasets:/data:ro"], {}, "read-only by its environment storage"),
        (["--env", "lab", "--mount", "a:/d", "--mount", "b:/d"], {}, "/d is mounted twice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], env: dict[str, str], says: str) -> None:
    result = acagpu("run", "--yes", "--emulator", *args, "busybox", "--", "true", env=env)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], result.stderr


def test_a_container_the_platform_refuses_is_explained_in_one_line_exit_5() -> None:
    result = acagpu(
        "run", "--emulator", "--time-scale", "0.002", "--yes", "-o", "json",
        "nvidia/cuda:13.0.1-base-ubuntu24.04", "--", "nvidia-smi",
    )  # fmt: skip
    assert result.exit_code == 5, result.output
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["exit_code_from"], doc["container"]["status"]) == (
        "container_refused",
        "acagpu",
        "refused",
    )
    message = doc["error"]["message"]
    # stopped before its pull: the platform's GpuDriverInfo event named the host's driver (issue 28)
    assert message.startswith("the container did not start: host driver 550.144.03"), message
    assert "GpuDriverInfo" in message and "CUDA 13.0" in message, message
    assert "580.65.06 or newer" in doc["error"]["hint"]  # what to do
    assert doc["cost"]["usd_estimate"] == 0.0 and doc["teardown"]["billing_stopped"] is True
