"""`acagpu local` input handling and `--sbatch`: nothing runs, one line and exit 2 on bad input."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["local", *args], catch_exceptions=False)


def test_sbatch_prints_the_slurm_script() -> None:
    result = run("--sbatch", "--image", "tensorflow/tensorflow:2.15.0-gpu", "--gpus", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("#!/bin/bash\n#SBATCH --job-name=acagpu-probe\n#SBATCH --gres=gpu:2\n")
    assert "apptainer exec --nv docker://tensorflow/tensorflow:2.15.0-gpu nvidia-smi" in result.stdout
    doc = json.loads(run("--sbatch", "--from-sif", "/scratch/tf.sif", "-o", "json").stdout)
    assert doc["command"] == "local" and "apptainer exec --nv /scratch/tf.sif nvidia-smi" in doc["sbatch"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "device=x"], "device= takes GPU indices"),
        (["--gpus", "0.5"], "is not all, a count"),
        (["--runtime", "podman", "--from-sif", "/x.sif"], "--from-sif runs an Apptainer image file"),
        (["--runtime", "kubernetes"], "Invalid value for '--runtime'"),
        (["--sbatch", "--gpus", "none"], "--sbatch needs at least one GPU"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_a_runtime_that_is_not_installed_is_bad_input() -> None:
    if shutil.which("apptainer") or shutil.which("singularity"):
        pytest.skip("apptainer is installed here")
    result = run("--runtime", "apptainer", "-o", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["message"] == (
        "--runtime apptainer: apptainer (or singularity) is not installed"
    )


def test_a_local_runs_plan_claims_no_replica_size_it_never_applies() -> None:
    """The document said `8 vCPU, 56Gi` (a T4 replica's) for a container the local runtime runs
    unlimited: what it did not apply, it does not claim."""
    import json

    from click.testing import CliRunner

    from aca_gpu.cli import cli

    result = CliRunner().invoke(
        cli, ["run", "--runtime", "podman", "--dry-run", "-o", "json", "busybox", "--", "true"]
    )
    assert result.exit_code == 0, result.output
    work = json.loads(result.stdout)["workload"]
    assert (work["cpu"], work["memory"]) == (None, None) and work["size"].startswith("not limited"), work
