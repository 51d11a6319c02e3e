"""`acagpu emulator serve` as a real background process, for tests that play the second shell, and
an `acagpu` command signalled at the moment its stderr says it waits (`signal_when_said`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACAGPU = [sys.executable, "-m", "aca_gpu"]


def free_port() -> int:
    """A loopback port nothing listens on now: a served stand-in model's port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def read_env(path: Path) -> dict[str, str]:
    """The `export KEY='value'` lines `emulator serve --env-file` writes."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        found[key] = value.strip("'")
    return found


def emulator_get(emu: dict[str, str], name: str) -> dict[str, Any]:
    """GET `/_emulator/NAME` (inventory, billing, ...) of the emulator `emu` describes, as JSON."""
    import requests

    answer = requests.get(
        f"{emu['ACAGPU_ARM_ENDPOINT']}/_emulator/{name}",
        headers={"Authorization": f"Bearer {emu['ACAGPU_TOKEN']}"},
        verify=emu["ACAGPU_CA_BUNDLE"],
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


@contextmanager
def background_server(
    args: list[str], env_file: Path, *, env: dict[str, str] | None = None
) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """`acagpu ARGS --env-file ENV_FILE` (`emulator serve` or `emulator replay`) started, its env
    file waited for; yields what the file says and the process. SIGTERM afterwards, failing if it
    does not stop within 20 s; its exit code is then the process's `returncode`."""
    server = subprocess.Popen(
        [*ACAGPU, *args, "--env-file", str(env_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not env_file.exists() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
        stopped = server.poll() is not None
        assert env_file.exists(), server.stderr.read() if stopped and server.stderr else "no env file"
        yield read_env(env_file), server
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            raise


@contextmanager
def emulator_serve(
    env_file: Path, *, time_scale: float | None = 0.002, extra: tuple[str, ...] = ()
) -> Iterator[dict[str, str]]:
    """Start the server (its own default speed with `time_scale=None`), wait for its env file, yield
    what it says; SIGTERM it afterwards, and fail if it does not stop within 20 s."""
    speed = [] if time_scale is None else ["--time-scale", str(time_scale)]
    with background_server(["emulator", "serve", *speed, *extra], env_file) as (found, server):
        # the server's own containers are acagpu-emu-<its pid>-…: another emulator's (a test
        # beside this one, a second suite) are not this test's to judge
        yield found | {"ACAGPU_EMULATOR_PID": str(server.pid)}


@contextmanager
def serve_behind_proxy(
    tmp_path: Path, *, extra: tuple[str, ...] = ()
) -> Iterator[tuple[dict[str, str], Any, dict[str, str]]]:
    """`emulator serve` with the chaos proxy in front (its traffic is what a test reads): the server's
    variables, the proxy, and a shell environment whose acagpu talks to the proxy. `extra`: more
    `emulator serve` options (`--faults ...`)."""
    from tests.chaos.proxy import ChaosProxy

    with (
        emulator_serve(tmp_path / "emu.env", extra=extra) as emu,
        ChaosProxy(emu["ACAGPU_ARM_ENDPOINT"], emu["ACAGPU_CA_BUNDLE"], workdir=tmp_path / "proxy") as proxy,
    ):
        shell = os.environ | emu | {"ACAGPU_POLLING_INTERVAL": "0.1"}
        shell |= {"ACAGPU_ARM_ENDPOINT": proxy.endpoint, "ACAGPU_CA_BUNDLE": proxy.ca_bundle}
        shell.pop("ACAGPU_ENV", None)
        yield emu, proxy, shell


@dataclass(frozen=True)
class Signalled:
    """What a command signalled by `signal_when_said` did: its exit code, its stdout, and its stderr
    in two parts, what it said up to the last signal and what it said after."""

    returncode: int
    stdout: str
    said: str
    after: str

    @property
    def stderr(self) -> str:
        return self.said + self.after


def signal_when_said(
    args: Sequence[str], steps: Sequence[tuple[str, int]], *, env: Mapping[str, str], wait_s: float = 60
) -> Signalled:
    """`acagpu ARGS` as a real process; for each (text, signal) of `steps` in turn, its stderr read
    until a line holds the text, then the signal sent (a Ctrl-C, a cancelled CI job's SIGTERM). The
    signal goes also when `wait_s` (one deadline for all steps) passed or stderr ended first, so a
    test fails on its own assertions, never hangs; the process then has `wait_s` to finish."""
    proc = subprocess.Popen(
        [*ACAGPU, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env)
    )
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + wait_s
        for wanted, signum in steps:
            for line in proc.stderr:
                seen.append(line)
                if wanted in line or time.monotonic() > deadline:
                    break
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=wait_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Signalled(proc.returncode, out, "".join(seen), err)
