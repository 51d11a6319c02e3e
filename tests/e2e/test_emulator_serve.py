"""`acagpu emulator serve` in the foreground and a second shell driving it: real processes throughout.

The front page's examples, pasted in order against `emulator serve` at its defaults, are run by
tests/e2e/test_doc_examples.py (with a 0.5 s polling interval). This test keeps what that one does
not: the user's default 5 s polling for `up` and `test` (a short tester used to finish between two
polls and lose its result line: exit 5 on a healthy simulated GPU), what each command's JSON says,
and that the server itself exits 0 on SIGTERM and removes its temporary CA folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.serving import read_env

ACAGPU = [sys.executable, "-m", "aca_gpu"]


@pytest.mark.slow(28)
def test_serve_then_a_second_shell_runs_the_journey_at_default_polling(tmp_path: Path) -> None:
    env_file = tmp_path / "emu.env"
    server = subprocess.Popen(
        [*ACAGPU, "emulator", "serve", "--time-scale", "0.002", "--env-file", str(env_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not env_file.exists() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
        assert env_file.exists(), server.stderr.read() if server.poll() is not None else "no env file"
        emu = read_env(env_file)
        assert set(emu) == {"ACAGPU_ARM_ENDPOINT", "ACAGPU_CA_BUNDLE", "ACAGPU_TOKEN", "ACAGPU_SUBSCRIPTION"}
        assert emu["ACAGPU_ARM_ENDPOINT"].startswith("https://127.0.0.1:")
        # nothing tuned: the user's default polling (5 s) for the commands whose tester must not
        # finish unseen between two looks; the rest polls fast (what they print does not depend on it)
        user = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")} | emu
        fast = user | {"ACAGPU_POLLING_INTERVAL": "0.1"}

        def acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, (args, done.stderr[-2000:])
            assert "Traceback" not in done.stderr, args
            assert emu["ACAGPU_TOKEN"] not in done.stdout + done.stderr, args  # never print a token
            return done

        up = json.loads(acagpu(user, "up", "--keep", "--yes", "--run-id", "serve1", "-o", "json").stdout)
        assert up["status"] == "ok" and up["teardown"]["status"] == "kept", up
        assert up["tester"]["result"]["status"] == "pass", up["tester"]
        tested = json.loads(acagpu(user, "test", "--run-id", "serve1", "-o", "json").stdout)
        assert tested["tester"]["result"]["status"] == "pass", tested["tester"]

        status = json.loads(acagpu(fast, "status", "-o", "json").stdout)
        assert [r["run_id"] for r in status["runs"]] == ["serve1"]
        assert json.loads(acagpu(fast, "smi", "--run-id", "serve1", "-o", "json").stdout)["driver_version"]
        listed = acagpu(fast, "exec", "--run-id", "serve1", "--", "nvidia-smi", "-L").stdout
        assert "GPU 0:" in listed, listed
        acagpu(fast, "logs", "--run-id", "serve1", "--system")
        down = json.loads(acagpu(fast, "down", "--run-id", "serve1", "--yes", "-o", "json").stdout)
        assert down["teardown"]["verified"] is True, down
        runs = json.loads(acagpu(fast, "status", "-o", "json").stdout)["runs"]
        assert all(r["run_id"] != "serve1" or r["phase"] == "deleting" for r in runs), runs
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert code == 0
    ca_dir = Path(read_env(env_file)["ACAGPU_CA_BUNDLE"]).parent
    assert not ca_dir.exists(), "the emulator's temporary CA folder was left behind"
