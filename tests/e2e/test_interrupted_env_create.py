"""Ctrl-C while `env create` builds: exit 130, one document, and it says what stays and how to go on.

It used to end on a bare `interrupted`, leaving the environment's group and its half-made
environment in the subscription with no word about them (nothing tears them down: a warm
environment is meant to stay).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.e2e.serving import emulator_get

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def test_ctrl_c_during_env_create_names_what_stays_and_both_ways_on(emu: object) -> None:
    shell = dict(os.environ)
    proc = subprocess.Popen(
        [*ACAGPU, "env", "create", "ci1", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json"],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(
        g["name"] == "rg-acagpu-env-ci1" for g in emulator_get(shell, "inventory")["resource_groups"]
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # the group exists, its environment is being made
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    error = json.loads(out)["error"]  # exactly one document
    assert error["code"] == "Interrupted" and "environment ci1 may be partly made" in error["message"]
    assert "acagpu env delete ci1 --yes" in error["hint"] and "acagpu env create ci1" in error["hint"]
    assert "Traceback" not in err

    # the hint's first way on works: the same create finishes it
    done = subprocess.run([*ACAGPU, "env", "create", "ci1", "-l", "eastus", "--yes", "-o", "json"],
                          env=shell, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr

    # Ctrl-C while an image is imported into the environment's registry: the same contract, on a
    # terminal's stderr (its steps are said there as they end)
    proc = subprocess.Popen(
        [*ACAGPU, "image", "stage", "nvidia/cuda:12.4.1-base-ubuntu22.04", "--env", "ci1", "--no-inspect",
         "--yes"],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    said = ""
    while "environment identity" not in said:  # the registry is made; the import comes next
        line = proc.stderr.readline()
        assert line, said
        said += line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, said + err
    errors = [line for line in err.splitlines() if line.startswith(("error:", "hint:"))]
    assert len(errors) == 2 and "registry already holds stays" in errors[0], err
    assert "acagpu env show ci1" in errors[1] and "Traceback" not in err
