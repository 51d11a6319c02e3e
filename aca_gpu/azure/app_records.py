"""Answers about environments, apps, jobs, replicas and executions read into `aca_gpu.models` records.

Each reader takes what the SDK returned (a model or a dict) as JSON (`resources.as_json`) and keeps
only the fields acagpu uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aca_gpu.azure.resources import as_json, props
from aca_gpu.models import (
    FINAL_EXECUTION_STATES,
    AppInfo,
    EnvInfo,
    ExecutionInfo,
    JobInfo,
    ReplicaContainerInfo,
    ReplicaInfo,
)


def _nonempty(value: Any) -> str | None:
    return str(value) if value else None


def env_info(obj: Any, rg: str) -> EnvInfo:
    doc = as_json(obj)
    p = props(doc)
    return EnvInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        location=str(doc.get("location", "")),
        provisioning_state=p.get("provisioningState"),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        tags=dict(doc.get("tags") or {}),
        workload_profiles=tuple(
            (str(w.get("name", "")), str(w.get("workloadProfileType", "")))
            for w in p.get("workloadProfiles") or []
            if isinstance(w, Mapping)
        ),
        logs_workspace=_logs_workspace(p.get("appLogsConfiguration")),
    )


def _logs_workspace(config: Any) -> str | None:
    """The customerId of a `log-analytics` destination (an `azure-monitor` one is read otherwise)."""
    if not isinstance(config, Mapping) or str(config.get("destination") or "").lower() != "log-analytics":
        return None
    analytics = config.get("logAnalyticsConfiguration")
    return _nonempty(analytics.get("customerId")) if isinstance(analytics, Mapping) else None


def app_info(obj: Any, rg: str) -> AppInfo:
    doc = as_json(obj)
    p = props(doc)
    scale = (p.get("template") or {}).get("scale") or {}
    return AppInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        provisioning_state=p.get("provisioningState"),
        running_status=p.get("runningStatus"),
        latest_revision=_nonempty(p.get("latestRevisionName")),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        min_replicas=scale.get("minReplicas"),
        max_replicas=scale.get("maxReplicas"),
        tags=dict(doc.get("tags") or {}),
    )


def job_info(obj: Any, rg: str) -> JobInfo:
    doc = as_json(obj)
    p = props(doc)
    return JobInfo(
        id=str(doc.get("id", "")),
        name=str(doc.get("name", "")),
        resource_group=rg,
        provisioning_state=p.get("provisioningState"),
        event_stream_endpoint=_nonempty(p.get("eventStreamEndpoint")),
        tags=dict(doc.get("tags") or {}),
        principal_id=_nonempty((doc.get("identity") or {}).get("principalId")),
    )


def replica_info(obj: Any) -> ReplicaInfo:
    doc = as_json(obj)
    p = props(doc)
    containers = tuple(
        ReplicaContainerInfo(
            name=str(c.get("name", "")),
            running_state=c.get("runningState"),
            ready=c.get("ready"),
            restart_count=c.get("restartCount"),
            details=_nonempty(c.get("runningStateDetails")),
            exec_endpoint=_nonempty(c.get("execEndpoint")),
            log_stream_endpoint=_nonempty(c.get("logStreamEndpoint")),
        )
        for c in (p.get("containers") or [])
        if isinstance(c, Mapping)
    )
    return ReplicaInfo(
        name=str(doc.get("name", "")),
        running_state=p.get("runningState"),
        containers=containers,
        details=_nonempty(p.get("runningStateDetails")),
    )


def _exit_codes(p: Mapping[str, Any]) -> tuple[int, ...]:
    """Containers' exit codes from properties.detailedStatus.replicas[].containers[].code (SDK 5.1).

    Only an ended execution's codes are exit codes: while it runs Azure answers -1 for each container,
    and a read that races the end would otherwise pass that off as the tester's exit code. A negative
    code is that placeholder even on an ended execution (a stopped one may keep it): a container's
    exit code is 0-255, and -1 read as one would fail a tester that passed.
    """
    if p.get("status") not in FINAL_EXECUTION_STATES:
        return ()
    detailed = p.get("detailedStatus")
    codes: list[int] = []
    replicas = detailed.get("replicas") if isinstance(detailed, Mapping) else None
    for replica in replicas if isinstance(replicas, list) else []:
        containers = replica.get("containers") if isinstance(replica, Mapping) else None
        for container in containers if isinstance(containers, list) else []:
            code = container.get("code") if isinstance(container, Mapping) else None
            if isinstance(code, int) and not isinstance(code, bool) and code >= 0:
                codes.append(code)
    return tuple(codes)


def execution_info(obj: Any) -> ExecutionInfo:
    doc = as_json(obj)
    p = props(doc)
    return ExecutionInfo(
        name=str(doc.get("name", "")),
        status=p.get("status"),
        start_time=_nonempty(p.get("startTime")),
        end_time=_nonempty(p.get("endTime")),
        exit_codes=_exit_codes(p),
        reason=_nonempty(p.get("reason")),
        message=_nonempty(p.get("message")),
        env=_template_env(p),
        states=_states(p),
    )


def _template_env(p: Mapping[str, Any]) -> dict[str, str]:
    """The first container's plain env values of an execution's own template."""
    template = p.get("template")
    containers = template.get("containers") if isinstance(template, Mapping) else None
    first = containers[0] if isinstance(containers, list) and containers else None
    env = first.get("env") if isinstance(first, Mapping) else None
    entries = env if isinstance(env, list) else []
    return {
        str(e["name"]): str(e["value"])
        for e in entries
        if isinstance(e, Mapping) and e.get("name") and isinstance(e.get("value"), str)
    }


def _states(p: Mapping[str, Any]) -> tuple[str, ...]:
    """detailedStatus.replicas[].containers[].status: where each replica's container is now."""
    detailed = p.get("detailedStatus")
    replicas = detailed.get("replicas") if isinstance(detailed, Mapping) else None
    found: list[str] = []
    for replica in replicas if isinstance(replicas, list) else []:
        containers = replica.get("containers") if isinstance(replica, Mapping) else None
        for container in containers if isinstance(containers, list) else []:
            status = container.get("status") if isinstance(container, Mapping) else None
            if isinstance(status, str) and status:
                found.append(status)
    return tuple(found)
