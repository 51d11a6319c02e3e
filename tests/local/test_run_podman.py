"""`acagpu run --runtime podman` against real Podman containers (no GPU: `--gpus none`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ACAGPU = [sys.executable, "-m", "aca_gpu"]
SECRET = "s3cr3t-v4lue-1"  # 14 characters; the container checks the length, never prints it


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACAGPU, "run", "--runtime", "podman", "--gpus", "none", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_run_is_docker_run_output_exit_code_env_and_secret(podman: str, test_image: str) -> None:
    script = 'echo out; echo "A=$A"; echo err >&2; [ ${#TOKEN} -eq 14 ] || exit 9; exit 3'
    done = _run(
        "-e", "A=1", "--secret-env", "TOKEN", test_image, "--", "sh", "-c", script, env={"TOKEN": SECRET}
    )
    assert done.returncode == 3, done.stderr  # the container's own code
    assert done.stdout == "out\nA=1\n"  # stdout carries only the container's stdout
    assert "err\n" in done.stderr and "container exited with code 3" in done.stderr
    assert SECRET not in done.stdout + done.stderr

    as_json = _run("-o", "json", "-e", "A=1", "--secret-env", "TOKEN", test_image, "sh", "-c", script,
                   env={"TOKEN": SECRET})  # fmt: skip
    assert as_json.returncode == 3, as_json.stderr
    assert SECRET not in as_json.stdout + as_json.stderr
    doc = json.loads(as_json.stdout)
    assert (doc["command"], doc["runtime"], doc["status"]) == ("run", "podman", "container_failed")
    assert (doc["exit_code"], doc["exit_code_from"]) == (3, "container")
    assert (doc["output"]["stdout"], doc["output"]["stderr"]) == ("out\nA=1\n", "err\n")
    assert doc["workload"]["secret_env"] == ["TOKEN"] and doc["workload"]["env"] == {"A": "1"}
    assert "-e TOKEN" in doc["commands"]["container"] and doc["error"] is None
    assert doc["teardown"]["status"] == "nothing-created"
    left = subprocess.run([podman, "ps", "-a", "-q", "--filter", f"name=acagpu-{doc['run_id']}"],
                          capture_output=True, text=True)  # fmt: skip
    assert left.stdout.strip() == ""


def test_a_container_that_cannot_start_is_one_line_and_exit_5(test_image: str) -> None:
    done = _run("-o", "json", test_image, "--", "no-such-program")
    assert done.returncode == 5, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["status"], doc["exit_code_from"], doc["container"]["status"]) == (
        "container_refused",
        "acagpu",
        "refused",
    )
    assert "no-such-program" in doc["error"]["message"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: the container did not start: ")


def test_a_zero_exit_is_ok_with_a_job_summary_and_mounts(test_image: str, tmp_path: Path) -> None:
    summary, data, ro = tmp_path / "summary.md", tmp_path / "data", tmp_path / "ro"
    data.mkdir()
    ro.mkdir()
    script = "echo fine; echo out > /data/result.txt; echo x > /ro/no.txt || echo read-only >&2"
    mounts = ("--mount", f"{data}:/data", "--mount", f"{ro}:/ro:ro")
    done = _run(
        "--github", *mounts, test_image, "sh", "-c", script, env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert (done.returncode, done.stdout) == (0, "fine\n"), done.stderr
    assert (data / "result.txt").read_text() == "out\n" and not (ro / "no.txt").exists()
    assert "read-only" in done.stderr and f"files in /data are in folder {data}" in done.stderr
    text = summary.read_text()
    assert "## acagpu run" in text and "exited with code 0" in text and "fine" in text


RUN_ID = f"ctrlc{os.getpid()}"  # this process's own: a second test run shares Podman's names


def _interrupt(run_id: str, test_image: str, env: dict[str, str] | None = None) -> str:
    """`acagpu run` of a long container, Ctrl-C once its first line came; its stderr."""
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--runtime", "podman", "--gpus", "none", "--run-id", run_id, test_image,
         "sh", "-c", "echo started; sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"  # live: the line arrives while the container runs
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    return err


def _left(podman: str, run_id: str) -> str:
    left = subprocess.run(
        [podman, "ps", "-a", "--format", "{{.Names}} {{.Status}}", "--filter", f"name={run_id}"],
        capture_output=True,
        text=True,
    )
    return left.stdout.strip()


def test_ctrl_c_stops_the_container_exit_130(podman: str, test_image: str) -> None:
    _interrupt(RUN_ID, test_image)
    assert _left(podman, RUN_ID) == ""


def test_ctrl_c_leaves_no_container_even_when_its_removal_is_slow(
    podman: str, test_image: str, tmp_path: Path
) -> None:
    """The thread running the container removes it after Ctrl-C; acagpu must not exit first. (A
    busy machine left one behind: `podman rm` had not yet ended when the prompt came back.)"""
    shim = tmp_path / "bin" / "podman"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\n[ "$1" = rm ] && sleep 3\nexec {podman} "$@"\n')
    shim.chmod(0o755)
    run_id = f"slowrm{os.getpid()}"
    try:
        _interrupt(
            run_id, test_image, env=os.environ | {"PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
        )
        assert _left(podman, run_id) == ""
    finally:  # what a failure left
        for line in _left(podman, run_id).splitlines():
            subprocess.run([podman, "rm", "-f", "--time", "0", line.split()[0]], capture_output=True)
