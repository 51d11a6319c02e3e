"""Azurite, Microsoft's own Azure Storage emulator, as the Storage queue service behind the emulator.

The queue semantics (visibility timeouts, dequeue counts, pop receipts, approximate counts) are
Azurite's, not ours: the emulator only starts it (HTTPS with the emulator's certificate, OAuth
`basic`, data in memory) and speaks to it. Azurite knows one account (`devstoreaccount1`); every
emulated storage account's queues live in it, so queue names must be unique across accounts
(acagpu's carry the run id). That sharing is this emulator's simplification, not Azure's.

Where Azurite comes from: `ACAGPU_AZURITE` (the `azurite-queue` script), else the one `make
test-tools` installs under the virtual environment (`$VENV/azurite`), else `azurite-queue` on PATH.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ACCOUNT = "devstoreaccount1"
AZURITE_ENV = "ACAGPU_AZURITE"
STORAGE_AUDIENCE = "https://storage.azure.com/"
START_TIMEOUT_S = 30.0


class AzuriteMissing(RuntimeError):
    """Azurite is not installed where the emulator looks."""


def find_azurite() -> str | None:
    named = os.environ.get(AZURITE_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    installed = Path(sys.prefix) / "azurite" / "node_modules" / ".bin" / "azurite-queue"
    if os.access(installed, os.X_OK):
        return str(installed)
    return shutil.which("azurite-queue")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Azurite:
    """One Azurite queue service for one emulator, stopped with it (its data goes too)."""

    def __init__(self, *, cert: Path, key: Path) -> None:
        exe = find_azurite()
        if exe is None:
            raise AzuriteMissing(
                "Azurite is not installed: `make test-tools` installs it (npm azurite into the virtual "
                f"environment), or name its azurite-queue script in {AZURITE_ENV}"
            )
        self.port = _free_port()
        self.endpoint = f"https://127.0.0.1:{self.port}/{ACCOUNT}"
        self._folder = tempfile.mkdtemp(prefix="acagpu-azurite-")
        self._log = open(Path(self._folder) / "azurite.log", "wb")  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            [
                exe,
                "--queueHost",
                "127.0.0.1",
                "--queuePort",
                str(self.port),
                "--inMemoryPersistence",
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
                "--disableProductStyleUrl",
                "--oauth",
                "basic",
                "--cert",
                str(cert),
                "--key",
                str(key),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self._folder,  # what Azurite writes beside its data (debug logs) goes with the folder
            start_new_session=True,  # a Ctrl-C meant for the emulator's caller is not Azurite's
        )
        atexit.register(self.stop)  # an emulator whose loop never got to its cleanup leaves none
        self._wait_listening()

    def _wait_listening(self) -> None:
        ends = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < ends:
            if self._proc.poll() is not None:
                text = (Path(self._folder) / "azurite.log").read_text(errors="replace")[-500:]
                self.stop()
                raise AzuriteMissing(f"Azurite exited at start ({self._proc.returncode}): {text.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AzuriteMissing(f"Azurite did not listen on port {self.port} within {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._log.close()
        shutil.rmtree(self._folder, ignore_errors=True)
