"""One emulator for the whole e2e session (HTTPS on loopback), reset before each test.

Commands run through Click's CliRunner with the same settings a user would give them: the
emulator's client environment, a small polling interval, and no config file.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

server_mod = pytest.importorskip("aca_gpu.emulator.server")

E2E_TIME_SCALE = 0.005


@pytest.fixture(scope="session")
def emulator() -> Iterator[object]:
    server = server_mod.EmulatorServer(time_scale=E2E_TIME_SCALE, workload="simulated", subscriptions=5)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def emu(emulator: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    emulator.reset()  # type: ignore[attr-defined]
    for key, value in emulator.client_env().items():  # type: ignore[attr-defined]
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ACAGPU_POLLING_INTERVAL", "0.1")
    monkeypatch.delenv("ACAGPU_CONFIG", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    yield emulator
    emulator.set_faults("")  # type: ignore[attr-defined]
