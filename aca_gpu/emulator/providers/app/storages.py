"""Environment storages (`managedEnvironments/{env}/storages/{name}`): Azure Files shares that apps and
jobs of the environment mount as volumes. The account key is kept, never answered (as Azure does).

Each storage is a folder under the server's work directory, so what one execution writes to a mounted
path, the next one reads (the container runs in Podman with the folder bind-mounted).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from aca_gpu.emulator.arm import empty_response, json_response, read_json
from aca_gpu.emulator.context import Ctx, Params
from aca_gpu.emulator.providers.app import models
from aca_gpu.emulator.providers.app.exceptions import InvalidProperty, ResourceNotFound
from aca_gpu.emulator.state import Environment

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}[a-z0-9]$|^[a-z0-9]$")
ACCESS_MODES = ("ReadWrite", "ReadOnly")


def storage_body(ctx: Ctx, env: Environment, name: str) -> dict[str, Any]:
    stored = env.storages[name]
    azure_file = {k: v for k, v in stored.get("azureFile", {}).items() if k != "accountKey"}
    env_id = f"/subscriptions/{ctx.subscription}/resourceGroups/{env.rg}/providers/Microsoft.App"
    return {
        "id": f"{env_id}/managedEnvironments/{env.name}/storages/{name}",
        "name": name,
        "type": "Microsoft.App/managedEnvironments/storages",
        "properties": {"azureFile": azure_file},
    }


def _env(ctx: Ctx, p: Params) -> Environment:
    return models.get_env(ctx, p["rg"], p["name"])


async def storages_list(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env = _env(ctx, p)
    return json_response({"value": [storage_body(ctx, env, n) for n in sorted(env.storages)]})


async def storages_get(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env = _env(ctx, p)
    if p["storage"] not in env.storages:
        raise ResourceNotFound("managedEnvironments/storages", p["storage"], env.rg)
    return json_response(storage_body(ctx, env, p["storage"]))


async def storages_create_or_update(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env = _env(ctx, p)
    name = p["storage"]
    if not NAME_RE.match(name):
        raise InvalidProperty(f"Storage name '{name}' is invalid: lowercase letters, digits and '-'.")
    body = read_json(await req.read())
    azure_file = ((body or {}).get("properties") or {}).get("azureFile") or {}
    missing = [k for k in ("accountName", "accountKey", "shareName") if not azure_file.get(k)]
    if missing:
        raise InvalidProperty(f"AzureFile storage '{name}' needs {', '.join(missing)}.")
    mode = azure_file.get("accessMode") or "ReadWrite"
    if mode not in ACCESS_MODES:
        raise InvalidProperty(f"accessMode must be one of {', '.join(ACCESS_MODES)}.")
    created = name not in env.storages
    env.storages[name] = {"azureFile": {**azure_file, "accessMode": mode}}
    return json_response(storage_body(ctx, env, name), status=201 if created else 200)


async def storages_delete(ctx: Ctx, req: web.Request, p: Params) -> web.StreamResponse:
    env = _env(ctx, p)
    env.storages.pop(p["storage"], None)
    return empty_response(200)


def check_volumes(env: Environment, template: dict[str, Any]) -> None:
    """An AzureFile volume must name a storage of the environment; a mount must name a volume."""
    names = set()
    for volume in template.get("volumes") or []:
        names.add(str(volume.get("name")))
        kind = str(volume.get("storageType") or "EmptyDir")
        storage = volume.get("storageName")
        if kind == "AzureFile" and storage not in env.storages:
            raise InvalidProperty(
                f"Storage '{storage}' of volume '{volume.get('name')}' was not found in managed environment "
                f"'{env.name}'."
            )
    for container in template.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            if str(mount.get("volumeName")) not in names:
                raise InvalidProperty(
                    f"Volume mount '{mount.get('volumeName')}' names no volume of the template."
                )
