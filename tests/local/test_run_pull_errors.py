"""`acagpu run --runtime podman`: a container refused or crashed at start ends in one line with its code.

Real Podman containers (no GPU: `--gpus none`): an image that cannot be pulled is `ImagePullFailed`
(exit 2, or 7 when its registry cannot be reached) as for `acagpu local`, a program built for
another architecture is a refusal (exit 5), a container killed by SIGKILL keeps exit 137 with the
reason beside it, and --max-minutes stops the container (exit 4) and removes it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from aca_gpu.config import Settings
from aca_gpu.output import Output
from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec
from aca_gpu.workflow.workload.run import run_local

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACAGPU, "run", "--runtime", "podman", "--gpus", "none", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_an_image_that_cannot_be_pulled_is_bad_input_not_a_refused_container(podman: str) -> None:
    done = _run("-o", "json", "nosuchimage-acagpu-x", "true")
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["status"], doc["exit_code_from"], doc["container"]["status"]) == (
        "bad_input",
        "acagpu",
        "refused",
    )
    assert doc["error"]["code"] == "ImagePullFailed" and doc["error"]["hint"]
    (error,) = _errors(done.stderr)
    assert error.startswith(
        'error: cannot pull image nosuchimage-acagpu-x: short-name "nosuchimage-acagpu-x"'
    )
    assert "did not start" not in done.stderr


def test_an_unreachable_registry_is_an_infrastructure_error(podman: str) -> None:
    done = _run("localhost:1/acagpu-nosuch:1", "true")  # nothing listens on port 1: refused at once
    assert done.returncode == 7, done.stderr
    (error,) = _errors(done.stderr)
    assert (
        error.startswith("error: cannot pull image localhost:1/acagpu-nosuch:1: ")
        and "connection refused" in error
    )
    assert "hint: check the network and the registry" in done.stderr


def test_a_program_for_another_architecture_is_refused_in_one_line(test_image: str, tmp_path: Path) -> None:
    program = tmp_path / "train"
    program.write_bytes(b"\x7fELF\x02\x01\x01\x00not-for-this-machine")  # an ELF header no kernel runs
    program.chmod(0o755)
    done = _run("-o", "json", "--mount", f"{tmp_path}:/app:ro", test_image, "/app/train")
    assert done.returncode == 5, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["status"], doc["container"]["status"]) == ("container_refused", "refused")
    assert "exec format error" in doc["error"]["message"] and "linux/amd64" in doc["error"]["hint"]
    (error,) = _errors(done.stderr)
    assert error.startswith("error: the container did not start: the program could not be executed")


def test_a_container_killed_by_sigkill_keeps_137_and_says_why(test_image: str) -> None:
    done = _run(test_image, "sh", "-c", 'echo started; sh -c "kill -9 \\$\\$"')
    assert (done.returncode, done.stdout) == (137, "started\n"), done.stderr
    assert _errors(done.stderr) == []  # the container's own failure: its code, not an acagpu error
    (line,) = [x for x in done.stderr.splitlines() if "container exited" in x]
    assert line.startswith("  container exited with code 137: killed by SIGKILL") and "--memory" in line


def test_max_minutes_stops_the_container_exit_4(podman: str, test_image: str) -> None:
    forever = "echo started; while :; do :; done"  # the image has no sleep: only its shell
    request = RunRequest(image=test_image, command=("sh", "-c", forever), runtime="podman", gpus="none",
                         run_id=f"maxmin{os.getpid()}")  # fmt: skip
    spec = make_run_spec(Settings(), request, owner="me")
    # --max-minutes takes whole minutes; the plan's deadline is what the runtime obeys: 1.5 s here
    spec = replace(spec, plan=replace(spec.plan, max_minutes=0.025))  # type: ignore[arg-type]
    stdout, stderr = io.StringIO(), io.StringIO()
    outcome = run_local(spec, Output("json", stdout=stdout, stderr=stderr))
    assert outcome.exit_code == 4, stderr.getvalue()
    doc = outcome.document()
    assert (doc["status"], doc["exit_code_from"], doc["container"]["status"]) == (
        "timed_out",
        "acagpu",
        "timeout",
    )
    assert "--max-minutes" in doc["container"]["reason"] and doc["output"]["stdout"] == "started\n"
    left = subprocess.run([podman, "ps", "-a", "-q", "--filter", f"name=acagpu-maxmin{os.getpid()}"],
                          capture_output=True, text=True)  # fmt: skip
    assert left.stdout.strip() == ""
