"""ACR's artifact streaming on the registry data plane, for registries the emulator holds.

A registry's host (`{name}.azurecr.io`) does not resolve to the emulator, so its data plane is
served at `/_acr/{login server}/...` on the emulator's HTTPS host, with ACR's own paths after it:

- POST/GET `/acr/v1/{repo}/_streaming`: the repository's streaming setting (`convertPushedImages`);
- GET `/acr/v1/{repo}/_tags/{tag}`: the tag's properties (its digest), as the SDK reads them;
- POST `/acr/v1/{repo}/_streaming/{digest}`: a conversion is requested (202, an operation id);
  GET of the same path: the image's last conversion (404 when none);
- GET `/acr/v1/{repo}/_operations/{id}`: the operation (NotStarted, Running with a progress, Succeeded);
- GET `/v2/{repo}/referrers/{digest}`: the streaming artifact, once converted, as a referrer.

The conversion takes `pulls.conversion_seconds(size)` on the scaled clock (UNCONFIRMED; a
`conversion` fault ends it Failed), and only a
Premium registry converts (the SKU artifact streaming needs; the refusal's wire form is UNCONFIRMED).
The calls need no token (UNCONFIRMED simplification: ACR answers 401 with a challenge, and the SDK
exchanges an Entra token for an ACR one; the emulator does not serve that exchange).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from aca_gpu.emulator import pulls
from aca_gpu.emulator.arm import json_response
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.registry import models
from aca_gpu.emulator.state import Registry, StagedImage

PREFIX = "/_acr/"
ARTIFACT_TYPE = "application/vnd.azure.artifact.streaming.v1"
_STREAMING = re.compile(r"^/acr/v1/(?P<repo>.+)/_streaming(?:/(?P<digest>sha256:[0-9a-f]{64}))?$")
_TAG = re.compile(r"^/acr/v1/(?P<repo>.+)/_tags/(?P<tag>[^/]+)$")
_OPERATION = re.compile(r"^/acr/v1/(?P<repo>.+)/_operations/(?P<op>[^/:]+)$")
_REFERRERS = re.compile(r"^/v2/(?P<repo>.+)/referrers/(?P<digest>sha256:[0-9a-f]{64})$")


def _error(status: int, code: str, message: str) -> web.Response:
    return json_response({"errors": [{"code": code, "message": message}]}, status=status)


def _images(reg: Registry, repo: str) -> list[tuple[str, StagedImage]]:
    prefix = repo.lower() + ":"
    return [(k, img) for k, img in reg.images.items() if k.startswith(prefix)]


def _by_digest(ctx: Ctx, reg: Registry, repo: str, digest: str) -> StagedImage | None:
    now = ctx.clock.now()
    return next(
        (img for _, img in _images(reg, repo) if img.digest == digest and now >= img.imported_at), None
    )


def _operation(ctx: Ctx, img: StagedImage) -> dict[str, Any]:
    ready, begun = img.streaming_ready_at or 0.0, img.streaming_from
    now = ctx.clock.now()
    done = now >= ready
    share = 1.0 if done or ready <= begun else (now - begun) / (ready - begun)
    return {
        "id": img.streaming_op,
        "digest": img.digest,
        "status": ("Failed" if img.streaming_fails else "Succeeded") if done else "Running",
        "progress": f"{int(share * 100)}%",
        "conversionFormat": "overlaybd",
        "conversionVersion": "v1",
    }


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def serve(ctx: Ctx, req: web.Request, path: str) -> web.StreamResponse:
    """Answer one data-plane request under `/_acr/{login server}` (404 for a registry not held)."""
    server, _, rest = path.removeprefix(PREFIX).partition("/")
    found = models.by_login_server(ctx, server)
    if found is None:
        return _error(404, "NAME_UNKNOWN", f"registry {server} is not known")
    owner, reg = found
    rest = "/" + rest
    if m := _STREAMING.match(rest):
        return await _streaming(owner, req, reg, m["repo"], m["digest"])
    if req.method == "GET" and (m := _TAG.match(rest)):
        return _tag(owner, reg, m["repo"], m["tag"])
    if req.method == "GET" and (m := _OPERATION.match(rest)):
        img = next((i for _, i in _images(reg, m["repo"]) if i.streaming_op == m["op"]), None)
        if img is None:
            return _error(404, "OPERATION_UNKNOWN", f"operation {m['op']} is not known")
        return json_response(_operation(owner, img))
    if req.method == "GET" and (m := _REFERRERS.match(rest)):
        img = _by_digest(owner, reg, m["repo"], m["digest"])
        manifests = []
        if (
            img is not None
            and img.streaming_ready_at is not None
            and not img.streaming_fails
            and owner.clock.now() >= img.streaming_ready_at
        ):
            manifests.append(
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": "sha256:" + uuid.uuid5(uuid.NAMESPACE_URL, img.digest).hex * 2,
                    "size": 1024,
                    "artifactType": ARTIFACT_TYPE,
                }
            )
        wanted = req.query.get("artifactType")
        manifests = [d for d in manifests if not wanted or d["artifactType"] == wanted]
        return json_response(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": manifests,
            }
        )
    return _error(404, "NOT_FOUND", f"{req.method} {rest} is not served")


def _tag(ctx: Ctx, reg: Registry, repo: str, tag: str) -> web.Response:
    img = reg.images.get(f"{repo}:{tag}".lower())
    if img is None or ctx.clock.now() < img.imported_at:
        return _error(404, "TAG_UNKNOWN", f"the tag {tag} is not in repository {repo}")
    stamp = _iso(datetime.now(UTC))
    attributes = {"deleteEnabled": True, "writeEnabled": True, "readEnabled": True, "listEnabled": True}
    return json_response(
        {
            "registry": reg.login_server,
            "imageName": repo,
            "tag": {
                "name": tag,
                "digest": img.digest,
                "createdTime": stamp,
                "lastUpdateTime": stamp,
                "signed": False,
                "changeableAttributes": attributes,
            },
        }
    )


async def _streaming(
    ctx: Ctx, req: web.Request, reg: Registry, repo: str, digest: str | None
) -> web.Response:
    if req.method not in ("GET", "POST"):
        return _error(405, "UNSUPPORTED", f"{req.method} is not served here")
    if req.method == "POST" and reg.sku != "Premium":
        return _error(
            400, "UNSUPPORTED", f"artifact streaming needs a Premium registry; {reg.name} is {reg.sku}"
        )
    if digest is None:  # the repository's setting
        if req.method == "POST":
            body = await req.json() if req.can_read_body else {}
            (reg.streaming.add if body.get("convertPushedImages") else reg.streaming.discard)(repo.lower())
        on = repo.lower() in reg.streaming
        return json_response(
            {"convertPushedImages": on, "conversionFormat": "overlaybd", "conversionVersion": "v1"}
        )
    img = _by_digest(ctx, reg, repo, digest)
    if img is None:
        return _error(404, "MANIFEST_UNKNOWN", f"manifest {digest} is not in repository {repo}")
    if req.method == "GET":
        if not img.streaming_op:
            return _error(404, "OPERATION_UNKNOWN", f"no streaming operation for {repo}@{digest}")
        return json_response(_operation(ctx, img))
    fails = not img.streaming_op and ctx.faults.fire("conversion", path=f"{repo}@{digest}") is not None
    for _, same in _images(reg, repo):  # every tag of this digest shares the one artifact
        if same.digest == digest and not same.streaming_op:
            same.streaming_fails = fails
            same.streaming_op = uuid.uuid4().hex
            same.streaming_from = ctx.clock.now()
            same.streaming_ready_at = ctx.clock.after_seconds(pulls.conversion_seconds(same.size_bytes))
    return json_response(_operation(ctx, img) | {"status": "NotStarted", "progress": "0%"}, status=202)
