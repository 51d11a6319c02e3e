"""Every test runs with its own cache and config dirs, so a developer's ~/.cache or config never leaks in."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("acagpu-user")
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(home / "cache"))
    monkeypatch.delenv("ACAGPU_CONFIG", raising=False)  # a named config file must exist
    monkeypatch.setenv("XDG_CONFIG_HOME", str(Path(home) / "config"))
    for name in (
        "ACAGPU_SUBSCRIPTION",
        "ACAGPU_ARM_ENDPOINT",
        "ACAGPU_TOKEN",
        "ACAGPU_CA_BUNDLE",
        "ACAGPU_LOCATION",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def acagpu_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's acagpu wheel, built once per session (`ci init --wheel` copies it)."""
    from aca_gpu.workflow import wheel

    return wheel.current_wheel(tmp_path_factory.mktemp("wheel")).path
