"""Every test runs with its own cache and config dirs, so a developer's ~/.cache or config never leaks in."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` run first, the rest in their usual order. `make test` runs four workers
    with worksteal: each starts on its share of the collection in order and an idle one takes the
    tail of a busy one's queue, so a 100 s scenario reached late would still be running long after
    every other test ended; first, it runs beside the rest."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # a stable sort


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
