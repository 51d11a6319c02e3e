"""Every line of a container that prints and exits at once reaches the user (issue 26, item 2).

`acagpu emulator serve --faults linger:seconds=0` removes a finished job replica (and its log) at the
tick its container exits: the worst case, since how long Azure keeps it is not established. The job
runs for real in Podman (`sh -c 'echo hello; exit 3'` lives ~0.3 s), cold and in a warm environment,
at a realistic polling interval; through the chaos proxy, every log stream connection is cut too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serving import emulator_get, serve_behind_proxy
from tests.local.conftest import podman, test_image  # noqa: F401  (fixtures)

ACAGPU = [sys.executable, "-m", "aca_gpu"]
AT_ONCE = ["sh", "-c", "echo hello; echo oops >&2; exit 3"]
NO_LINGER = ("--faults", "linger:seconds=0")
CUT_EVERY_LOG_STREAM = {"fault": "stream_cut", "path": "/logstream", "after_lines": 0, "count": 0}


def _acagpu(shell: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACAGPU, *args], env=shell, capture_output=True, text=True, timeout=240)


def _realistic(shell: dict[str, str]) -> dict[str, str]:
    """Not the tests' usual 0.05 s polls, which look for the replica 20 times a second."""
    return shell | {"ACAGPU_POLLING_INTERVAL": "1.0"}


def _document(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 3, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert (doc["status"], doc["exit_code"], doc["exit_code_from"]) == ("container_failed", 3, "container")
    return doc


def _every_line(doc: dict[str, Any]) -> None:
    output = doc["output"]
    said = {k: v for k, v in doc.items() if k not in ("output", "plan")}  # the notes say how it was read
    assert (output["stdout"], output["stderr"]) == ("hello\n", "oops\n"), (output, said)
    sources = {line["source"] for line in output["lines"]}
    assert sources <= {"stream", "log-analytics"} and sources, output["lines"]


@pytest.mark.slow(22)
def test_a_container_that_ends_at_once_keeps_every_line_warm_and_cold(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    with serve_behind_proxy(tmp_path, extra=NO_LINGER) as (_emu, _proxy, shell):
        shell = _realistic(shell)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        for _ in range(3):
            warm = _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", test_image, "--", *AT_ONCE)
            _every_line(_document(warm))
        terminal = _acagpu(shell, "run", "--env", "lab", "--yes", test_image, "--", *AT_ONCE)
        assert (terminal.returncode, terminal.stdout) == (3, "hello\n"), terminal.stderr
        assert "oops\n" in terminal.stderr
        cold = _acagpu(shell, "run", "--yes", "-o", "json", test_image, "--", *AT_ONCE)
        _every_line(_document(cold))


def test_every_line_arrives_when_every_log_stream_connection_is_cut(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    """The proxy cuts every log stream before its first line: the lines come from the fallback, and
    the document and the terminal say so."""
    with serve_behind_proxy(tmp_path, extra=NO_LINGER) as (_emu, proxy, shell):
        shell = _realistic(shell)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {"rules": [{"fault": "stream_cut", "path": "/logstream", "after_lines": 0, "count": 0}]}
        )
        doc = _document(
            _acagpu(shell, "run", "--env", "lab", "--yes", "-o", "json", test_image, "--", *AT_ONCE)
        )
        _every_line(doc)
        assert {line["source"] for line in doc["output"]["lines"]} == {"log-analytics"}
        terminal = _acagpu(shell, "run", "--env", "lab", "--yes", test_image, "--", *AT_ONCE)
        assert (terminal.returncode, terminal.stdout) == (3, "hello\n"), terminal.stderr
        assert "from Log Analytics" in terminal.stderr


def _inventory(emu: dict[str, str]) -> dict[str, Any]:
    return emulator_get(emu, "inventory")


def _interrupt_when(
    shell: dict[str, str],
    emu: dict[str, str],
    image: str,
    script: str,
    ready: Callable[[dict[str, Any]], bool],
) -> tuple[int, dict[str, Any]]:
    """`run --env lab -o json` of `script`, SIGINT once the emulator's inventory says `ready`."""
    proc = subprocess.Popen(
        [*ACAGPU, "run", "--env", "lab", "--yes", "-o", "json", image, "--", "sh", "-c", script],
        env=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not ready(_inventory(emu)):
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before its moment"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err
    return proc.returncode, json.loads(out)


@pytest.mark.slow(22)
def test_ctrl_c_after_the_container_ended_still_says_how_it_ended(
    tmp_path: Path,
    podman: str,  # noqa: F811
    test_image: str,  # noqa: F811
) -> None:
    """Issue 26, item 11: `container: not-started` after Ctrl-C although the container ran. Once its
    execution has failed with exit 3 (the run is still reading its lines: every log stream is cut,
    and Log Analytics ingests 3 s later at this time scale), Ctrl-C: exit 130, and the document says
    the container exited with 3; Ctrl-C while it runs says it was stopped."""
    slower = ("--time-scale", "0.05", *NO_LINGER)
    with serve_behind_proxy(tmp_path, extra=slower) as (emu, proxy, shell):
        shell = _realistic(shell)
        made = _acagpu(shell, "env", "create", "lab", "-l", "eastus", "--gpu", "t4", "--yes", "-o", "json")
        assert made.returncode == 0, made.stderr
        proxy.set_rules(
            {"rules": [{"fault": "stream_cut", "path": "/logstream", "after_lines": 0, "count": 0}]}
        )

        def failed(inv: dict[str, Any]) -> bool:
            return any(e["job"].startswith("run-") and e["status"] == "Failed" for e in inv["executions"])

        code, doc = _interrupt_when(shell, emu, test_image, "echo hello; exit 3", failed)
        assert (code, doc["status"], doc["exit_code_from"]) == (130, "interrupted", "acagpu"), doc
        assert (doc["container"].get("status"), doc["container"].get("exit_code")) == ("exited", 3), doc

        proxy.set_rules({"rules": []})

        def running(inv: dict[str, Any]) -> bool:
            return any(r["owner"].startswith("run-") and r["phase"] == "Running" for r in inv["replicas"])

        # the test image has no `sleep`: this one runs in the emulator's sandbox, which has
        code, doc = _interrupt_when(shell, emu, "busybox", "echo started; sleep 60", running)
        assert (code, doc["status"]) == (130, "interrupted"), doc
        assert doc["container"]["status"] == "stopped", doc["container"]
