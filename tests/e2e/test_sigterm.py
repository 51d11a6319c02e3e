"""SIGTERM (a cancelled CI job, `timeout`) ends a run like Ctrl-C: teardown, one document, exit 130,
and the embedded emulator's temporary folder removed."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.serving import signal_when_said


def test_sigterm_tears_down_and_cleans_up(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ACAGPU_EMULATOR_FAULTS": "stuck",  # the explorer never starts: `up` is mid-wait when signalled
        "ACAGPU_PROGRESS_S": "0.5",
    }
    env.pop("ACAGPU_CONFIG", None)
    args = ["up", "--emulator", "--time-scale", "0.002", "--start-timeout", "2h", "-o", "json"]
    # signalled once it waits for the explorer
    done = signal_when_said(args, [("waiting for probe and test", signal.SIGTERM)], env=env)
    text = done.stderr
    assert done.returncode == 130, text
    doc = json.loads(done.stdout)
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
    done = signal_when_said([*args, "--", *never], [("waiting for first answer", signal.SIGTERM)], env=env)
    text = done.stderr
    assert done.returncode == 130, text
    doc = json.loads(done.stdout)
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
    steps = [("waiting for first answer", signal.SIGINT), ("Ctrl-C again", signal.SIGINT)]
    done = signal_when_said([*args, "--", *never], steps, env=env)
    text = done.stderr
    assert done.returncode == 130, text
    doc = json.loads(done.stdout)
    assert doc["status"] == "interrupted" and doc["teardown"]["status"] == "left", doc["teardown"]
    assert "acagpu down --run-id sc2 --yes" in done.after, text
    assert "Traceback" not in text, text
