"""A real registry on loopback: Debian's `docker-registry` (distribution 2.8) behind token auth.

The session fixture starts, in this order: a CA for TLS (trustme), an in-process token server
(HTTPS, signs JWTs with a key whose certificate the registry trusts), and the registry itself as a
subprocess (HTTPS, token auth, filesystem storage in a tmp dir). It then pushes CUDA-like images
through the distribution API: a tiny gzip layer, one config per tag with the env NVIDIA's images
carry, image manifests (OCI and Docker), and one OCI index with linux/amd64 + linux/arm64.
Anonymous clients may pull; only `pusher` may push.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVICE = "acagpu-test-registry"
ISSUER = "acagpu-test-token-issuer"
PUSHER = ("pusher", secrets.token_urlsafe(12))
REPO = "nvidia/cuda"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"

# tags as nvidia/cuda names them; the registry returns them in lexical order, not version order
TAGS = (
    "11.8.0-runtime-ubuntu22.04",
    "11.8.0-cudnn8-runtime-ubuntu22.04",
    "12.0.1-runtime-ubuntu22.04",
    "12.1.0-runtime-ubuntu22.04",
    "12.1.1-base-ubuntu22.04",
    "12.1.1-devel-ubuntu22.04",
    "12.1.1-runtime-ubuntu20.04",
    "12.1.1-runtime-ubuntu22.04",
    "12.2.2-devel-ubi8",
    "12.2.2-runtime-ubuntu22.04",
    "12.3.2-runtime-ubuntu22.04",
    "12.4.1-cudnn-runtime-ubuntu22.04",
    "12.4.1-runtime-ubuntu22.04",  # pushed as an OCI index (amd64 + arm64)
    "12.6.3-runtime-ubuntu22.04",
    "12.6.3-runtime-ubuntu24.04",
    "12.8.1-runtime-ubuntu22.04",  # pushed as a Docker schema 2 manifest
    "12.9.1-runtime-ubuntu22.04",
    "13.0.0-base-ubuntu24.04",
    "13.0.0-runtime-ubuntu24.04",
    "13.0.1-runtime-ubuntu22.04",
    "latest-notes",  # not a CUDA tag: discovery must ignore it
)
INDEX_TAG = "12.4.1-runtime-ubuntu22.04"
# more repositories, so the catalog (which distribution 2.8 does paginate) spans several pages
EXTRA_REPOS = tuple(f"acagpu-test/extra-{i}" for i in range(6))
DOCKER_TAG = "12.8.1-runtime-ubuntu22.04"


def require_cuda(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"cuda>={major}.{minor} brand=tesla,driver>=470,driver<471"


@dataclass
class TokenLog:
    issued: list[tuple[str, str]] = field(default_factory=list)  # (subject, scope)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Pushed:
    digest: str  # what the tag points at
    image_digest: str  # the linux/amd64 image manifest
    media_type: str
    cuda_version: str | None


@dataclass
class LiveRegistry:
    url: str  # https://127.0.0.1:PORT
    host: str  # 127.0.0.1:PORT
    ca_bundle: str
    tokens: TokenLog
    pushed: dict[str, Pushed]
    arm64_digest: str
    repo: str = REPO
    tags: tuple[str, ...] = TAGS
    index_tag: str = INDEX_TAG  # an OCI index: linux/arm64 first, then linux/amd64
    docker_tag: str = DOCKER_TAG  # a Docker schema 2 manifest
    pusher: tuple[str, str] = PUSHER
    repositories: tuple[str, ...] = (REPO, *EXTRA_REPOS)

    def token_requests(self) -> int:
        with self.tokens.lock:
            return len(self.tokens.issued)


# -- signer and token server -------------------------------------------------------------------
def _signer(tmp: Path) -> tuple[ec.EllipticCurvePrivateKey, str, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "acagpu test token signer")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = tmp / "token-signer.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
    return key, x5c, path


def _token_handler(key: ec.EllipticCurvePrivateKey, x5c: str, log: TokenLog) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            subject = ""
            header = self.headers.get("Authorization", "")
            if header.startswith("Basic "):
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                if (user, password) != PUSHER:
                    self.send_response(401)
                    self.end_headers()
                    return
                subject = user
            access = []
            for scope in query.get("scope", []):
                kind, _, rest = scope.partition(":")
                name, _, actions = rest.rpartition(":")
                wanted = set(actions.split(","))
                public = {"*"} if kind == "registry" else {"pull"}  # anyone may list the catalog
                granted = wanted if subject == PUSHER[0] else wanted & public
                access.append({"type": kind, "name": name, "actions": sorted(granted)})
            now = int(time.time())
            claims = {
                "iss": ISSUER,
                "sub": subject,
                "aud": query.get("service", [""])[0],
                "exp": now + 300,
                "nbf": now - 10,
                "iat": now,
                "jti": secrets.token_hex(8),
                "access": access,
            }
            token = jwt.encode(claims, key, algorithm="ES256", headers={"x5c": [x5c]})
            with log.lock:
                log.issued.append((subject, " ".join(query.get("scope", []))))
            body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _registry_binary() -> str | None:
    found = shutil.which("docker-registry") or (
        "/usr/bin/docker-registry" if os.path.exists("/usr/bin/docker-registry") else None
    )
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    # `make test` installs it (make test-tools); a developer box as root gets it here once
    subprocess.run(["apt-get", "install", "-y", "-q", "docker-registry"], capture_output=True, timeout=300)
    return shutil.which("docker-registry")


# -- pushing through the distribution API ------------------------------------------------------
class Pusher:
    def __init__(self, url: str, ca: str, token_url: str, repo: str = REPO) -> None:
        self.url, self.ca, self.repo = url, ca, repo
        resp = requests.get(
            token_url,
            params={"service": SERVICE, "scope": f"repository:{repo}:pull,push"},
            auth=PUSHER,
            verify=ca,
            timeout=10,
        )
        resp.raise_for_status()
        self.headers = {"Authorization": f"Bearer {resp.json()['token']}"}

    def blob(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = requests.post(
            f"{self.url}/v2/{self.repo}/blobs/uploads/", headers=self.headers, verify=self.ca, timeout=10
        )
        assert start.status_code == 202, start.text
        location = start.headers["Location"]
        if location.startswith("/"):
            location = self.url + location
        sep = "&" if "?" in location else "?"
        done = requests.put(
            f"{location}{sep}digest={digest}",
            data=data,
            headers={**self.headers, "Content-Type": "application/octet-stream"},
            verify=self.ca,
            timeout=10,
        )
        assert done.status_code == 201, done.text
        return digest

    def manifest(self, reference: str, body: dict[str, Any], media_type: str) -> str:
        raw = json.dumps(body).encode()
        resp = requests.put(
            f"{self.url}/v2/{self.repo}/manifests/{reference}",
            data=raw,
            headers={**self.headers, "Content-Type": media_type},
            verify=self.ca,
            timeout=10,
        )
        assert resp.status_code == 201, resp.text
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        assert resp.headers["Docker-Content-Digest"] == digest
        return digest


def _layer() -> tuple[bytes, str]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        payload = b"acagpu test layer\n"
        info = tarfile.TarInfo("etc/acagpu-test")
        info.size, info.mtime = len(payload), 0
        tar.addfile(info, io.BytesIO(payload))
    tar_bytes = raw.getvalue()
    return gzip.compress(tar_bytes, mtime=0), "sha256:" + hashlib.sha256(tar_bytes).hexdigest()


def _push_image(
    pusher: Pusher,
    layer: tuple[str, int, str],
    version: str | None,
    arch: str,
    docker: bool = False,
    tag: str | None = None,
) -> tuple[str, str]:
    """Push one config + manifest (by tag, or by digest); returns (manifest digest, media type)."""
    layer_digest, layer_size, diff_id = layer
    env = ["PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin"]
    if version:
        env += [f"CUDA_VERSION={version}", f"NVIDIA_REQUIRE_CUDA={require_cuda(version)}"]
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Env": env},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    config_digest = pusher.blob(config)
    media = DOCKER_MANIFEST if docker else OCI_MANIFEST
    manifest = {
        "schemaVersion": 2,
        "mediaType": media,
        "config": {
            "mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
            "digest": config_digest,
            "size": len(config),
        },
        "layers": [
            {"mediaType": DOCKER_LAYER if docker else OCI_LAYER, "digest": layer_digest, "size": layer_size}
        ],
    }
    raw = json.dumps(manifest).encode()
    return pusher.manifest(tag or "sha256:" + hashlib.sha256(raw).hexdigest(), manifest, media), media


def _populate(pusher: Pusher) -> tuple[dict[str, Pushed], str]:
    gz, diff_id = _layer()
    layer = (pusher.blob(gz), len(gz), diff_id)
    pushed: dict[str, Pushed] = {}
    arm64 = ""
    for tag in TAGS:
        version = tag.split("-")[0] if tag[0].isdigit() else None
        if tag == INDEX_TAG:
            amd64, media = _push_image(pusher, layer, version, "amd64")
            arm64, _ = _push_image(pusher, layer, version, "arm64")
            index = {
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": [
                    {
                        "mediaType": media,
                        "digest": d,
                        "size": 0,
                        "platform": {"os": "linux", "architecture": a},
                    }
                    for d, a in ((arm64, "arm64"), (amd64, "amd64"))  # amd64 second: the pick must look
                ],
            }
            # descriptor sizes must be right for the registry to accept the index
            for entry in index["manifests"]:
                head = requests.head(
                    f"{pusher.url}/v2/{REPO}/manifests/{entry['digest']}",
                    headers={**pusher.headers, "Accept": media},
                    verify=pusher.ca,
                    timeout=10,
                )
                entry["size"] = int(head.headers["Content-Length"])
            digest = pusher.manifest(tag, index, OCI_INDEX)
            pushed[tag] = Pushed(digest, amd64, OCI_INDEX, version)
            continue
        digest, media = _push_image(pusher, layer, version, "amd64", docker=tag == DOCKER_TAG, tag=tag)
        pushed[tag] = Pushed(digest, digest, media, version)
    return pushed, arm64


# -- the fixture -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRegistry]:
    binary = _registry_binary()
    if not binary:
        pytest.skip("docker-registry is not installed and cannot be installed here (not root / no apt-get)")
    tmp = tmp_path_factory.mktemp("registry")
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_path = tmp / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    cert_path, key_path = tmp / "server.pem", tmp / "server.key"
    server_cert.cert_chain_pems[0].write_to_path(str(cert_path))
    server_cert.private_key_pem.write_to_path(str(key_path))

    key, x5c, signer_path = _signer(tmp)
    log = TokenLog()
    token_server = ThreadingHTTPServer(("127.0.0.1", 0), _token_handler(key, x5c, log))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(ctx)
    token_server.socket = ctx.wrap_socket(token_server.socket, server_side=True)
    token_url = f"https://127.0.0.1:{token_server.server_address[1]}/token"
    thread = threading.Thread(target=token_server.serve_forever, daemon=True)
    thread.start()

    port = _free_port()
    config = tmp / "config.yml"
    config.write_text(
        json.dumps(  # YAML is a superset of JSON: no YAML writer needed
            {
                "version": 0.1,
                "log": {"level": "error", "accesslog": {"disabled": True}},
                "storage": {"filesystem": {"rootdirectory": str(tmp / "data")}},
                "http": {
                    "addr": f"127.0.0.1:{port}",
                    "secret": secrets.token_hex(16),
                    "tls": {"certificate": str(cert_path), "key": str(key_path)},
                },
                "auth": {
                    "token": {
                        "realm": token_url,
                        "service": SERVICE,
                        "issuer": ISSUER,
                        "rootcertbundle": str(signer_path),
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    stderr_path = tmp / "registry.log"
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=err, stderr=err)
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"{url}/v2/", verify=str(ca_path), timeout=2).status_code == 401:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"registry did not start: {stderr_path.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.1)
        pusher = Pusher(url, str(ca_path), token_url)
        pushed, arm64 = _populate(pusher)
        for name in EXTRA_REPOS:
            extra = Pusher(url, str(ca_path), token_url, name)
            gz, diff_id = _layer()
            _push_image(extra, (extra.blob(gz), len(gz), diff_id), None, "amd64", tag="1")
        with log.lock:
            log.issued.clear()
        yield LiveRegistry(url, f"127.0.0.1:{port}", str(ca_path), log, pushed, arm64)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        token_server.shutdown()
        token_server.server_close()
