"""api-version resilience over HTTPS against the emulator: a refused stable version falls back along the
chain and is remembered; the preview-only calls start at the newest preview and fall back too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.pipeline.transport import RequestsTransport
from click.testing import CliRunner

from aca_gpu.azure import api_versions
from aca_gpu.cli import cli


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """(method, url) of every request this process sends through azure-core."""
    seen: list[tuple[str, str]] = []
    real = RequestsTransport.send

    def recording(self: RequestsTransport, request: Any, **kwargs: Any) -> Any:
        seen.append((request.method, request.url))
        return real(self, request, **kwargs)

    monkeypatch.setattr(RequestsTransport, "send", recording)
    api_versions.forget()
    yield seen
    api_versions.forget()


def test_a_refused_stable_version_falls_back_and_is_remembered(emu: Any, sent: list[tuple[str, str]]) -> None:
    emu.set_faults("apiversion:version=2026-07-01")
    args = ["up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "30", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"
    every = [api_versions._version_of(url) for _, url in sent]
    app_versions = [v for v in every if v in api_versions.STABLE]
    assert app_versions.count("2026-07-01") == 1, "the refused version was tried more than once"
    assert app_versions[0] == "2026-07-01" and app_versions[1] == "2026-01-01"
    assert set(app_versions[1:]) == {"2026-01-01"} and len(app_versions) > 10
    assert api_versions.working(api_versions.STABLE) == "2026-01-01"


def test_preview_calls_try_newer_previews_first(emu: Any, sent: list[tuple[str, str]]) -> None:
    # the region has not received the newest preview yet: refused once, then the next one sticks
    emu.set_faults("apiversion:version=2026-03-02-preview")
    args = ["up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "30", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    previews = [v for v in (api_versions._version_of(url) for _, url in sent) if v in api_versions.PREVIEW]
    newest, older = "2026-03-02-preview", "2025-02-02-preview"
    assert previews[0] == newest and older in previews, previews
    # the probe and the tester start side by side: each may try the newest once before one of them
    # has learnt it is refused; after that only the older one goes out
    assert previews.count(newest) <= 2, previews
    assert newest not in previews[previews.index(older) + 2 :], previews
    assert set(previews) == {newest, older}
    assert api_versions.working(api_versions.PREVIEW) == older


def test_every_preview_refused_is_one_clear_error(emu: Any) -> None:
    from aca_gpu.azure.api_versions import preview_call
    from aca_gpu.errors import CloudError

    def refused(version: str) -> str:
        raise CloudError(f"api-version {version} refused", code="InvalidApiVersionParameter")

    with pytest.raises(CloudError, match="every preview api-version was refused") as caught:
        preview_call("get access token for job j", refused)
    assert caught.value.code == "PreviewApiUnavailable"
