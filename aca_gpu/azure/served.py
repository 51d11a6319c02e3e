"""A served app's ARM shapes (external ingress, an HTTP scale rule, a startup probe, secrets) and
the reads `acagpu serve` needs: the app's FQDN and replicas, and the URL a client reaches it at.

On Azure the URL is `https://<fqdn>`. The emulator's ingress cannot own that name, so against an
emulator (ACAGPU_ARM_ENDPOINT) the URL is the loopback address its `/_emulator/ingress` route maps
the FQDN to; an endpoint override without that route (a recorded replay) keeps the Azure form.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aca_gpu.azure.app_bodies import app_body
from aca_gpu.azure.app_records import app_info
from aca_gpu.azure.apps import get_app
from aca_gpu.azure.resources import as_json
from aca_gpu.azure.translate import CORE_RETRIED_STATUS, retrying, translate_errors
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import AppInfo, AppSpec, RegistryCred

if TYPE_CHECKING:
    from aca_gpu.azure.clients import Clients

SCALE_RULE = "http-concurrency"
GATEWAY_TIMEOUT = 504
# ACA's probe limits (the API spec's ContainerAppProbe): periodSeconds 1-240, failureThreshold 1-10,
# initialDelaySeconds 1-60
PROBE_PERIOD_MAX_S, PROBE_FAILURES_MAX, PROBE_DELAY_MAX_S = 240, 10, 60
PROBE_TIMEOUT_S = 5


@dataclass(frozen=True)
class ServedAppSpec:
    """An app that serves HTTP: the app's own spec plus its ingress, scale rule and probe."""

    app: AppSpec
    port: int
    concurrency: int = 10
    cooldown_s: int = 300
    health_path: str = "/"
    load_timeout_s: int = 1800
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)  # name -> value (PUT only)
    registries: tuple[RegistryCred, ...] = ()
    volumes: tuple[tuple[str, str], ...] = ()  # (volume name, environment storage name): Azure Files


@dataclass(frozen=True)
class ServedInfo:
    """The app as ARM answers it, and what serving adds: its FQDN and scale settings."""

    app: AppInfo
    fqdn: str | None
    target_port: int | None
    cooldown_s: int | None
    cpu: float = 0.0  # what the app's container asks for: its replicas are billed for it
    memory_gib: float = 0.0


def startup_probe(path: str, port: int, load_timeout_s: int) -> dict[str, Any]:
    """A startup probe that gives the model `load_timeout_s` to answer `path`. The platform (its
    Kubernetes prober) looks first `initialDelaySeconds` after the container starts, then every
    `periodSeconds`, and restarts the container at the `failureThreshold`-th failed look in a row:
    so the last look falls at delay + (looks - 1) x period, which is made to reach the load timeout
    (ten looks at most; one a second for a load under ten seconds)."""
    looks = max(1, min(PROBE_FAILURES_MAX, load_timeout_s))
    period = max(1, -(-load_timeout_s // looks))
    delay = min(PROBE_DELAY_MAX_S, period)
    if looks > 1:
        period = max(1, min(PROBE_PERIOD_MAX_S, -(-(load_timeout_s - delay) // (looks - 1))))
    return {
        "type": "Startup",
        "httpGet": {"path": path, "port": port},
        "initialDelaySeconds": delay,
        "periodSeconds": period,
        "failureThreshold": looks,
        "timeoutSeconds": min(PROBE_TIMEOUT_S, period),
    }


def served_body(spec: ServedAppSpec) -> dict[str, Any]:
    body = app_body(spec.app)
    props = body["properties"]
    config: dict[str, Any] = {
        "activeRevisionsMode": "Single",
        "ingress": {"external": True, "targetPort": spec.port, "transport": "auto", "allowInsecure": False},
    }
    if spec.secrets:
        config["secrets"] = [{"name": k, "value": v} for k, v in spec.secrets.items()]
    if spec.registries:
        config["registries"] = [_registry(r) for r in spec.registries]
    props["configuration"] = config
    container = props["template"]["containers"][0]
    container["probes"] = [startup_probe(spec.health_path, spec.port, spec.load_timeout_s)]
    if spec.volumes:
        props["template"]["volumes"] = [
            {"name": v, "storageType": "AzureFile", "storageName": storage} for v, storage in spec.volumes
        ]
    props["template"]["scale"] = {
        "minReplicas": spec.app.min_replicas,
        "maxReplicas": spec.app.max_replicas,
        "cooldownPeriod": spec.cooldown_s,
        "rules": [{"name": SCALE_RULE, "http": {"metadata": {"concurrentRequests": str(spec.concurrency)}}}],
    }
    return body


def _registry(cred: RegistryCred) -> dict[str, Any]:
    if cred.identity:
        return {"server": cred.server, "identity": cred.identity}
    return {"server": cred.server, "username": cred.username, "passwordSecretRef": cred.password_secret}


def served_info(obj: Any, rg: str) -> ServedInfo:
    doc = as_json(obj)
    props = doc.get("properties") or {}
    ingress = (props.get("configuration") or {}).get("ingress") or {}
    template = props.get("template") or {}
    scale = template.get("scale") or {}
    resources = ((template.get("containers") or [{}])[0] or {}).get("resources") or {}
    try:
        cpu = float(resources.get("cpu") or 0.0)
        memory = float(str(resources.get("memory") or "0").removesuffix("Gi"))
    except ValueError:
        cpu, memory = 0.0, 0.0
    return ServedInfo(
        app=app_info(obj, rg),
        fqdn=ingress.get("fqdn") or None,
        target_port=ingress.get("targetPort"),
        cooldown_s=scale.get("cooldownPeriod"),
        cpu=cpu,
        memory_gib=memory,
    )


def create_served_app(clients: Clients, spec: ServedAppSpec) -> ServedInfo:
    """PUT the app (idempotent, so an unreadable answer is sent again) and wait for its LRO.

    A 504 is not sent again at once: on a full profile ARM answers the create 504 although the app
    exists (#1705), and each of azure-core's retries of it would wait its back-off (50 s in all) for
    the same answer. When the app exists the 504 is the caller's to follow; when it does not, the
    PUT goes again with the usual retries."""
    from azure.mgmt.appcontainers.models import ContainerApp

    body = ContainerApp(served_body(spec))
    ops = clients.apps.container_apps
    rg, name = spec.app.resource_group, spec.app.name

    def put(**options: Any) -> ServedInfo:
        with translate_errors("create container app", name):
            found = ops.begin_create_or_update(rg, name, body, **options).result()
        return served_info(found, rg)

    try:  # first without azure-core's retries of a status
        return retrying("create container app", name, lambda: put(retry_status=0))
    except AcaGpuError as exc:
        status = getattr(exc.__cause__, "status_code", None)
        if status not in CORE_RETRIED_STATUS:
            raise
        if status == GATEWAY_TIMEOUT and get_app(clients, rg, name) is not None:
            raise
    return retrying("create container app", name, put)


def read_served(clients: Clients, rg: str, name: str) -> ServedInfo | None:
    if get_app(clients, rg, name) is None:
        return None
    with translate_errors("read container app", name):
        return served_info(clients.apps.container_apps.get(rg, name), rg)


def revision_health(clients: Clients, rg: str, name: str) -> dict[str, str] | None:
    """The app's latest revision as ARM reports its health: {revision, health_state, running_state,
    replicas (the count it reports)}; None when there is none yet."""
    app = get_app(clients, rg, name)
    if app is None or not app.latest_revision:
        return None
    with translate_errors("read revision of", name):
        rev = clients.apps.container_apps_revisions.get_revision(rg, name, app.latest_revision)
    return {
        "revision": str(rev.name or app.latest_revision),
        "health_state": str(getattr(rev.health_state, "value", rev.health_state) or ""),
        "running_state": str(getattr(rev.running_state, "value", rev.running_state) or ""),
        "replicas": str(rev.replicas or 0),
    }


def url_of(clients: Clients, fqdn: str) -> str:
    """The URL a client reaches the app at (see the module doc)."""
    settings = clients.settings
    if not settings.arm_endpoint:
        return f"https://{fqdn}"
    request = urllib.request.Request(
        settings.arm_endpoint.rstrip("/") + "/_emulator/ingress",
        headers={"Authorization": f"Bearer {settings.token or ''}"},
    )
    context = ssl.create_default_context(cafile=settings.ca_bundle) if settings.ca_bundle else None
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            apps = json.loads(answer.read().decode()).get("apps") or []
    except (OSError, ValueError, urllib.error.URLError):
        return f"https://{fqdn}"
    for item in apps:
        if str(item.get("fqdn", "")).lower() == fqdn.lower():
            return str(item["url"])
    return f"https://{fqdn}"
