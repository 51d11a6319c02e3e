"""`acagpu emulator serve` in the foreground and a second shell driving it: real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.serving import emulator_serve, read_env

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def test_serve_then_a_second_shell_runs_up_and_status(tmp_path: Path) -> None:
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
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.05"}

        up = subprocess.run(
            [*ACAGPU, "up", "--yes", "--run-id", "serve1", "--keep", "-o", "json"],
            env=shell,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert up.returncode == 0, up.stderr
        doc = json.loads(up.stdout)
        assert doc["status"] == "ok" and doc["teardown"]["status"] == "kept"
        assert emu["ACAGPU_TOKEN"] not in up.stdout + up.stderr  # never print a token

        status = subprocess.run(
            [*ACAGPU, "status", "-o", "json"], env=shell, capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 0, status.stderr
        assert [r["run_id"] for r in json.loads(status.stdout)["runs"]] == ["serve1"]

        down = subprocess.run(
            [*ACAGPU, "down", "--run-id", "serve1", "--yes", "-o", "json"],
            env=shell,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert down.returncode == 0, down.stderr
        assert json.loads(down.stdout)["teardown"]["verified"] is True
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


def test_default_settings_serve_then_the_readme_journey_in_a_second_shell(tmp_path: Path) -> None:
    """README's two-shell journey with nothing tuned: default time scale, default 5 s polling.

    A short tester used to finish between two polls and lose its result line (exit 5 on a healthy
    simulated GPU); now every step must succeed.
    """
    with emulator_serve(tmp_path / "emu.env", time_scale=None) as served:
        shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_POLLING")}
        shell |= served

        def acagpu(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=180)

        steps = [
            ("up", "--keep", "--yes", "--run-id", "readme1", "-o", "json"),
            ("smi", "--run-id", "readme1", "-o", "json"),
            ("exec", "--run-id", "readme1", "--", "nvidia-smi", "-L"),
            ("test", "--run-id", "readme1", "-o", "json"),
            ("logs", "--run-id", "readme1", "--system"),
            ("down", "--run-id", "readme1", "--yes", "-o", "json"),
        ]
        for args in steps:
            done = acagpu(*args)
            assert done.returncode == 0, (args, done.stderr[-2000:])
            assert "Traceback" not in done.stderr, args
            if args[0] == "exec":
                assert "GPU 0:" in done.stdout, done.stdout
            if args[0] == "test":
                assert json.loads(done.stdout)["tester"]["result"]["status"] == "pass"
        runs = json.loads(acagpu("status", "-o", "json").stdout)["runs"]
        assert all(r["run_id"] != "readme1" or r["phase"] == "deleting" for r in runs), runs
