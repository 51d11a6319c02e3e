"""`acagpu local` and `acagpu doctor` against real Podman containers on a machine without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import threading

from click.testing import CliRunner, Result

from aca_gpu.cli import cli
from aca_gpu.local.commands import container_command
from aca_gpu.local.gpus import parse_gpus
from aca_gpu.local.runner import run_container


def acagpu(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=False)


def test_local_reports_no_gpu_in_the_container_exit_5(test_image: str) -> None:
    result = acagpu(
        "local", "--runtime", "podman", "--image", test_image, "--tester-image", test_image, "-o", "json"
    )
    assert result.exit_code == 5, result.output
    doc = json.loads(result.stdout)
    assert (doc["command"], doc["runtime"], doc["status"]) == ("local", "podman", "gpu_check_failed")
    explorer = doc["explorer"]
    assert explorer["refused"].startswith("no GPU visible in the container: Podman has no CDI specification")
    assert "nvidia.com/gpu=all" in explorer["raw"] and explorer["exit_code"] in (125, 126)
    assert "acagpu doctor --write-cdi" in doc["error"]["hint"] and doc["error"]["exit_code"] == 5
    assert doc["results"][0]["status"] == "fail"
    # the image has no python: the tester fails to start, unless the probe's verdict stopped it first
    assert doc["tester"]["status"] in ("not-run", "fail")
    assert "podman run --rm --network none" in doc["commands"]["explorer"]
    assert doc["teardown"]["status"] == "nothing-created" and doc["cost"]["usd_estimate"] == 0.0
    assert "container refused to start: no GPU visible in the container" in result.stderr


def test_local_without_a_gpu_request_sees_no_nvidia_smi(test_image: str) -> None:
    result = acagpu("local", "--runtime", "podman", "--image", test_image, "--gpus", "none", "--no-tester")
    assert result.exit_code == 5, result.output
    assert "explorer       refused to start: no GPU visible in the container: nvidia-smi is not there" in (
        result.stdout
    )
    assert "hint: Docker: `--gpus all`" in result.stderr


def test_a_real_container_run_is_a_plain_record(test_image: str) -> None:
    cmd = container_command(
        "podman", test_image, ["/bin/sh", "-c", 'echo "$GREETING"; echo oops >&2; exit 3'],
        gpus=parse_gpus("none"), env={"GREETING": "hello from a container"},
    )  # fmt: skip
    run = run_container(cmd, timeout=60)
    assert (run.exit_code, run.stdout, run.stderr, run.refused) == (
        3,
        "hello from a container\n",
        "oops\n",
        None,
    )


def test_a_cancelled_run_leaves_no_container(podman: str, test_image: str) -> None:
    name = f"acagpu-test-cancel-{os.getpid()}"
    cmd = container_command(
        "podman", test_image, ["/bin/sh", "-c", "while :; do :; done"], gpus=parse_gpus("none"), name=name
    )
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    run = run_container(cmd, timeout=60, cancel=cancel)
    assert run.cancelled and run.exit_code is None and run.seconds < 20
    left = subprocess.run(
        [podman, "ps", "-a", "--filter", f"name={name}", "-q"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""


def test_doctor_reads_what_podman_really_printed(podman: str, test_image: str) -> None:
    refused = subprocess.run(
        [podman, "run", "--rm", "--device", "nvidia.com/gpu=all", test_image, "nvidia-smi"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode != 0
    result = acagpu("doctor", "--from-file", "-", "-o", "json", stdin=refused.stderr)
    assert result.exit_code == 5
    assert [f["kind"] for f in json.loads(result.stdout)["findings"]] == ["cdi-device-unresolvable"]


def test_local_docker_without_an_engine_is_one_line_exit_2() -> None:
    result = acagpu("local", "--runtime", "docker")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --runtime docker: ") and (
        "no Docker engine answers" in line or "docker is not installed" in line
    )


def test_an_image_that_cannot_be_pulled_is_a_pull_error_not_a_gpu_failure(podman: str) -> None:
    """A short name or an unknown image never started: a pull error (2), or 7 when the registry
    could not be reached; never "container refused to start" and exit 5."""
    short = acagpu("local", "--runtime", "podman", "--image", "nosuchimage-acagpu-x", "-o", "json")
    doc = json.loads(short.stdout)
    assert short.exit_code == 2, short.output
    assert doc["error"]["code"] == "ImagePullFailed" and "cannot pull" in doc["error"]["message"], doc[
        "error"
    ]
    assert "refused to start" not in short.stderr
    unreachable = acagpu("local", "--runtime", "podman", "--image", "localhost/acagpu-nosuch:1")
    assert unreachable.exit_code == 7 and "cannot pull" in unreachable.stderr, unreachable.output
