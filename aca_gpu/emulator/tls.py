"""A throwaway CA (trustme) and a 127.0.0.1 server certificate, written where clients can read the CA.

The server certificate and its key are written too (`server-cert.pem`, `server-key.pem`): Azurite,
which serves the Storage queue data plane beside the emulator, speaks HTTPS with the same
certificate, so a container that trusts the emulator's CA trusts it as well."""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme

CERT_FILE, KEY_FILE = "server-cert.pem", "server-key.pem"


def make_tls(workdir: Path) -> tuple[ssl.SSLContext, Path]:
    """Return the server SSL context and the path of the CA PEM the client must trust."""
    ca = trustme.CA(organization_name="acagpu emulator")
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca_path = workdir / "emulator-ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    cert.cert_chain_pems[0].write_to_path(str(workdir / CERT_FILE))
    cert.private_key_pem.write_to_path(str(workdir / KEY_FILE))
    return ctx, ca_path
