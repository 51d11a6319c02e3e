"""SIGTERM (a cancelled CI job, `timeout`) ends a run like Ctrl-C: teardown, one document, exit 130,
and the embedded emulator's temporary folder removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def test_sigterm_tears_down_and_cleans_up(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ACAGPU_EMULATOR_FAULTS": "stuck",  # the explorer never starts: `up` is mid-wait when signalled
        "ACAGPU_PROGRESS_S": "0.5",
    }
    env.pop("ACAGPU_CONFIG", None)
    args = ["up", "--emulator", "--time-scale", "0.002", "--start-timeout", "2h", "-o", "json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "aca_gpu", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 60
        for line in proc.stderr:  # signal once it waits for the explorer
            seen.append(line)
            if "waiting for probe and test" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(seen) + err
    assert proc.returncode == 130, text
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and doc["error"]["exit_code"] == 130, doc["error"]
    assert doc["teardown"]["billing_stopped"] is True, doc["teardown"]
    assert "Traceback" not in text
    assert not [p for p in os.listdir(tmp_path) if p.startswith("acagpu-emulator-")], os.listdir(tmp_path)


@pytest.mark.slow(6)
def test_sigterm_while_serve_waits_for_its_first_answer_tears_it_down(tmp_path: Path) -> None:
    """A model that never answers: `serve` is waiting for its first answer when signalled; what it
    made is scaled to zero and deleted, one document, exit 130."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "ACAGPU_PROGRESS_S": "0.5"}
    env.pop("ACAGPU_CONFIG", None)
    never = [sys.executable, "-c", "import time; time.sleep(60)"]
    args = ["serve", "--emulator", "--time-scale", "0.002", "--run-id", "sig1", "-o", "json", "python:3.12"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "aca_gpu", *args, "--", *never],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            seen.append(line)
            if "waiting for first answer" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(seen) + err
    assert proc.returncode == 130, text
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and doc["kept"] is False, doc
    assert doc["teardown"]["billing_stopped"] is True, doc["teardown"]
    assert "Traceback" not in text, text


@pytest.mark.slow(6)
def test_a_second_ctrl_c_during_serves_teardown_leaves_it_and_says_how_to_delete_it(tmp_path: Path) -> None:
    """Ctrl-C while serve waits starts its teardown (here slowed: the app's delete is refused, so it
    keeps trying); a second Ctrl-C stops it there, and the command that removes the run is said."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ACAGPU_PROGRESS_S": "0.5",
        "ACAGPU_EMULATOR_FAULTS": "deny:action=Microsoft.App/containerApps/delete",
    }
    env.pop("ACAGPU_CONFIG", None)
    never = [sys.executable, "-c", "import time; time.sleep(60)"]
    args = ["serve", "--emulator", "--time-scale", "0.002", "--run-id", "sc2", "-o", "json", "python:3.12"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "aca_gpu", *args, "--", *never],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 60
        for wanted in ("waiting for first answer", "Ctrl-C again"):
            for line in proc.stderr:
                seen.append(line)
                if wanted in line or time.monotonic() > deadline:
                    break
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(seen) + err
    assert proc.returncode == 130, text
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and doc["teardown"]["status"] == "left", doc["teardown"]
    assert "acagpu down --run-id sc2 --yes" in err, text
    assert "Traceback" not in text, text
