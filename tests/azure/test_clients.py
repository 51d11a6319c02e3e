"""Subscription resolution order, the endpoint override contract, and the token never showing."""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

import pytest

from aca_gpu.azure import clients as cl
from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.config import Settings, load_settings
from aca_gpu.errors import AuthError

SECRET = "eyJhbGciOiJIUzI1NiJ9.secret-token-value.sig"


def fake_az(tmp_path: Path, sub: str | None) -> Path:
    """A real `az` executable on PATH that prints a subscription id (or fails like a logged-out az)."""
    exe = tmp_path / "az"
    body = f'echo "{sub}"' if sub else 'echo "Please run az login" >&2; exit 1'
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@pytest.fixture
def az_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_az(tmp_path, "sub-from-az")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return tmp_path


def test_resolution_order(az_path: Path) -> None:
    env = {"ACAGPU_SUBSCRIPTION": "sub-acagpu", "AZURE_SUBSCRIPTION_ID": "sub-azure"}
    s = Settings()
    assert cl.resolve_subscription(s, "sub-flag", env) == "sub-flag"
    assert cl.resolve_subscription(s, None, env) == "sub-acagpu"
    assert cl.resolve_subscription(s, None, {"AZURE_SUBSCRIPTION_ID": "sub-azure"}) == "sub-azure"
    assert (
        cl.resolve_subscription(Settings(subscription="sub-file"), None, {"AZURE_SUBSCRIPTION_ID": "x"})
        == "sub-file"
    )
    assert cl.resolve_subscription(s, None, {}) == "sub-from-az"  # a real subprocess


def test_no_subscription_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_az(tmp_path, None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AuthError, match="subscription") as caught:
        cl.resolve_subscription(Settings(), None, {})
    assert caught.value.exit_code == 2
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cl.az_cli_subscription() is None


def test_static_token_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(env={"ACAGPU_TOKEN": SECRET, "ACAGPU_SUBSCRIPTION": "s"}, file={})
    clients = cl.make_clients(settings)
    cred = clients.credential
    assert isinstance(cred, cl.StaticTokenCredential)
    assert cred.get_token(cl.ARM_SCOPE).token == SECRET
    assert cred.get_token_info(cl.ARM_SCOPE).token == SECRET
    cloud = AzureCloud(clients)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("aca_gpu").debug("state %r %s %r %r", cred, cred, clients, cloud)
    for text in (repr(cred), str(cred), repr(clients), repr(cloud), repr(settings), caplog.text):
        assert SECRET not in text


def test_endpoint_override_reaches_the_sdk_pipeline(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    # something listens there, as an emulator would: clients refuse an endpoint on this machine
    # that nothing answers (`emulator_listening`)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener_closer = listener.close
    settings = load_settings(
        env={
            "ACAGPU_ARM_ENDPOINT": f"https://127.0.0.1:{port}/",
            "ACAGPU_CA_BUNDLE": str(ca),
            "ACAGPU_TOKEN": SECRET,
            "ACAGPU_SUBSCRIPTION": "sub-1",
            "ACAGPU_POLLING_INTERVAL": "0.5",
        },
        file={},
    )
    clients = cl.make_clients(settings)
    options = clients.pipeline_options()
    assert options["base_url"] == f"https://127.0.0.1:{port}"
    assert options["connection_verify"] == str(ca)
    assert options["polling_interval"] == 0.5
    assert 429 in options["retry_on_status_codes"] and 503 in options["retry_on_status_codes"]
    assert clients.verify == str(ca)
    apps = clients.apps
    assert apps._config.base_url == f"https://127.0.0.1:{port}"
    assert apps._config.subscription_id == "sub-1"
    assert apps._config.polling_interval == 0.5
    assert clients.resources._config.subscription_id == "sub-1"
    listener_closer()


def test_a_flag_beats_the_exported_variable_through_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolved once: `--subscription` lands in Settings, and the client never re-reads the variable."""
    from aca_gpu.config import load_settings

    monkeypatch.setenv("ACAGPU_SUBSCRIPTION", "11111111-1111-1111-1111-111111111111")
    flagged = load_settings(file={}).with_overrides(subscription="22222222-2222-2222-2222-222222222222")
    assert cl.make_clients(flagged).subscription_id == "22222222-2222-2222-2222-222222222222"
    # reap --subscription A --subscription B: one settings object per flag, each honoured
    subs = ["33333333-3333-3333-3333-333333333333", "44444444-4444-4444-4444-444444444444"]
    clients = [cl.make_clients(load_settings(file={}).with_overrides(subscription=s)) for s in subs]
    assert [c.subscription_id for c in clients] == subs
