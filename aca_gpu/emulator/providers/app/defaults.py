"""What ARM does to a Microsoft.App body between the request and the answer: drop nulls, fill defaults.

The recordings show it: a PUT that sends `"env": null, "command": null, "resources": null` for a
container gets back the container without those keys and with `resources` filled
(`{"cpu": 0.5, "memory": "1Gi", "ephemeralStorage": "2Gi"}`), `scale` gains `maxReplicas: 10`, and
the configuration and template come back with a fixed set of top-level keys (null when unset).
Clients rely on both: the Azure CLI indexes `env` as a list and crashes on a stored null.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from aca_gpu.emulator import versions

DEFAULT_CPU = 0.5
DEFAULT_MEMORY = "1Gi"
DEFAULT_MAX_REPLICAS = 10
DEFAULT_MAX_INACTIVE_REVISIONS = 100
DEFAULT_COOLDOWN_S, DEFAULT_POLLING_S = 300, 30
DEFAULT_TRAFFIC = [{"weight": 100, "latestRevision": True}]
# ACA grants ephemeral storage in proportion to the CPU (0.25 → 1Gi, 0.5 → 2Gi, 1 → 4Gi), capped.
EPHEMERAL_GIB_PER_CORE = 4
EPHEMERAL_CAP_GIB = 8

_APP_CONFIG_KEYS = ("secrets", "activeRevisionsMode", "ingress", "registries", "dapr", "maxInactiveRevisions")
_APP_TEMPLATE_KEYS = (
    "revisionSuffix",
    "terminationGracePeriodSeconds",
    "containers",
    "initContainers",
    "scale",
    "volumes",
    "serviceBinds",
)
_JOB_CONFIG_KEYS = (
    "secrets",
    "triggerType",
    "replicaTimeout",
    "replicaRetryLimit",
    "manualTriggerConfig",
    "scheduleTriggerConfig",
    "eventTriggerConfig",
    "registries",
    "dapr",
)
_JOB_TEMPLATE_KEYS = ("containers", "initContainers", "volumes")


def drop_nulls(value: Any) -> Any:
    """A copy without null members at any depth (list items stay, cleaned)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value if v is not None]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """PATCH semantics as Microsoft.App applies them: objects merge member by member, lists and scalars
    replace, and a null leaves the current value alone (the Azure CLI sends nulls for "unchanged")."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch) if patch is not None else copy.deepcopy(target)
    out = copy.deepcopy(target)
    for k, v in patch.items():
        if v is None:
            continue
        out[k] = merge_patch(out.get(k), v)
    return out


def _ephemeral(cpu: Any) -> str:
    try:
        cores = float(cpu)
    except (TypeError, ValueError):
        cores = DEFAULT_CPU
    gib = min(EPHEMERAL_CAP_GIB, max(1.0, cores * EPHEMERAL_GIB_PER_CORE))
    return f"{gib:g}Gi"


def _memory(value: Any) -> Any:
    """`1.0Gi` -> `1Gi`, `0.50Gi` -> `0.5Gi`: Azure answers the quantity in its shortest form (recorded)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Gi|Mi)", str(value))
    return f"{float(m.group(1)):g}{m.group(2)}" if m else value


def _container(raw: dict[str, Any], *, ephemeral: bool) -> dict[str, Any]:
    """Resources as ARM stores them: defaults filled, memory normalised, and ephemeral storage derived
    from the CPU (read-only in the spec: recorded, a job PATCH that sent `1Gi` with 0.5 CPU got `2Gi`)."""
    c: dict[str, Any] = drop_nulls(raw)
    res = dict(c.get("resources") or {})
    res.setdefault("cpu", DEFAULT_CPU)
    res["memory"] = _memory(res.get("memory", DEFAULT_MEMORY))
    res.pop("ephemeralStorage", None)
    if ephemeral:
        res["ephemeralStorage"] = _ephemeral(res["cpu"])
    c["resources"] = res
    return c


def app_template(raw: dict[str, Any]) -> dict[str, Any]:
    """A container app template as ARM stores it (containers cleaned and given resources)."""
    t: dict[str, Any] = drop_nulls(raw)
    t["containers"] = [_container(c, ephemeral=True) for c in t.get("containers") or []]
    if "initContainers" in t:
        t["initContainers"] = [_container(c, ephemeral=True) for c in t["initContainers"]]
    scale = dict(t.get("scale") or {})
    scale.setdefault("maxReplicas", DEFAULT_MAX_REPLICAS)
    if not scale.get("rules"):
        scale.pop("rules", None)
    t["scale"] = scale
    return t


def job_template(raw: dict[str, Any]) -> dict[str, Any]:
    """A job template as ARM stores it (its answers add ephemeral storage from 2025 on)."""
    t: dict[str, Any] = drop_nulls(raw)
    t["containers"] = [_container(c, ephemeral=False) for c in t.get("containers") or []]
    if "initContainers" in t:
        t["initContainers"] = [_container(c, ephemeral=False) for c in t["initContainers"]]
    return t


def _with_keys(stored: dict[str, Any], keys: tuple[str, ...], fills: dict[str, Any]) -> dict[str, Any]:
    out = {k: stored.get(k, fills.get(k)) for k in keys}
    out.update({k: v for k, v in stored.items() if k not in out})
    return out


def app_configuration_answer(stored: dict[str, Any]) -> dict[str, Any]:
    fills = {"activeRevisionsMode": "Single", "maxInactiveRevisions": DEFAULT_MAX_INACTIVE_REVISIONS}
    return _with_keys(secrets_answer(stored), _APP_CONFIG_KEYS, fills)


def app_template_answer(stored: dict[str, Any]) -> dict[str, Any]:
    out = _with_keys(stored, _APP_TEMPLATE_KEYS, {"revisionSuffix": ""})
    scale = out.get("scale")
    if isinstance(scale, dict):
        fills: dict[str, Any] = {"minReplicas": None}
        if versions.shape_2025():  # recorded: the 2025 answers fill KEDA's cooldown and polling defaults
            fills.update(cooldownPeriod=DEFAULT_COOLDOWN_S, pollingInterval=DEFAULT_POLLING_S)
        out["scale"] = {**fills, **scale, "rules": scale.get("rules")}
    return out


def secrets_answer(stored: dict[str, Any]) -> dict[str, Any]:
    """ARM never answers a secret's value (only `listSecrets` does): names and references stay."""
    out = dict(stored)
    if isinstance(out.get("secrets"), list):
        out["secrets"] = [
            {k: v for k, v in s.items() if k != "value"} if isinstance(s, dict) else s for s in out["secrets"]
        ]
    return out


def job_configuration_answer(stored: dict[str, Any]) -> dict[str, Any]:
    return _with_keys(secrets_answer(stored), _JOB_CONFIG_KEYS, {})


def job_template_answer(stored: dict[str, Any]) -> dict[str, Any]:
    out = _with_keys(stored, _JOB_TEMPLATE_KEYS, {})
    if versions.shape_2025():  # recorded: 2025 answers give a job's containers ephemeral storage too
        out["containers"] = [
            {**c, "resources": {**c["resources"], "ephemeralStorage": _ephemeral(c["resources"]["cpu"])}}
            for c in out.get("containers") or []
        ]
    return out
