"""Response bodies for Microsoft.App resources, in the shapes the recordings show."""

from __future__ import annotations

from typing import Any

from aca_gpu.emulator import catalog, placement, versions
from aca_gpu.emulator.arm import iso_offset, iso_ticks, iso_z
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.app import defaults, models
from aca_gpu.emulator.state import App, Environment, Execution, Job, Replica, Revision, key

RP = "providers/Microsoft.App"
KEDA_VERSION, DAPR_VERSION = "2.12.1", "1.12.5"  # as the May 2024 recording reports them
DOMAIN_VERIFICATION_ID = "D3F71C85EB6552E36A89A3E4A080C3CFB00181670B659B0003264FC673AA9B00"


def _system_data(created: Any) -> dict[str, Any]:
    stamp = iso_ticks(created)
    return {
        "createdBy": "acagpu@emulator.local",
        "createdByType": "User",
        "createdAt": stamp,
        "lastModifiedBy": "acagpu@emulator.local",
        "lastModifiedByType": "User",
        "lastModifiedAt": stamp,
    }


def rg_path(ctx: Ctx, rg: str) -> str:
    return f"/subscriptions/{ctx.subscription}/resourceGroups/{rg}"


def data_url(ctx: Ctx, rg: str, tail: str) -> str:
    """A data-plane URL: the real path shape on the emulator's host (no /providers/ segment)."""
    return f"{ctx.endpoint}{rg_path(ctx, rg)}/{tail}"


def env_body(ctx: Ctx, env: Environment) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"{rg_path(ctx, env.rg)}/{RP}/managedEnvironments/{env.name}",
        "name": env.name,
        "type": "Microsoft.App/managedEnvironments",
        "location": catalog.display_location(env.location),
        "tags": env.tags,
        "systemData": _system_data(env.created),
        "properties": {
            "provisioningState": models.env_state(ctx, env),
            "daprAIInstrumentationKey": None,
            "daprAIConnectionString": None,
            "vnetConfiguration": None,
            "defaultDomain": env.default_domain,
            "staticIp": env.static_ip,
            "appLogsConfiguration": _app_logs(env.extra.get("appLogsConfiguration")),
            "zoneRedundant": bool(env.extra.get("zoneRedundant", False)),
            "kedaConfiguration": {"version": KEDA_VERSION},
            "daprConfiguration": {"version": DAPR_VERSION},
            "eventStreamEndpoint": data_url(ctx, env.rg, f"managedEnvironments/{env.name}/eventstream"),
            "customDomainConfiguration": {
                "customDomainVerificationId": DOMAIN_VERIFICATION_ID,
                **dict.fromkeys(
                    (
                        "dnsSuffix",
                        "certificateValue",
                        "certificatePassword",
                        "thumbprint",
                        "subjectName",
                        "expirationDate",
                    )
                ),
            },
            "workloadProfiles": env.profiles or None,  # recorded: null in a Consumption-only one
            "infrastructureResourceGroup": None,
            "peerAuthentication": {"mtls": {"enabled": False}},
            "peerTrafficConfiguration": {"encryption": {"enabled": False}},
        },
    }
    if env.identity.get("type", "None") != "None":  # only once asked for (no recording shows one)
        body["identity"] = env.identity
    # no `environmentMode`: the 2025 answers never carry it, workload profiles or not (recorded)
    if versions.shape_2025():  # recorded: the newer API's settings, unset, and public access on
        body["properties"].update(dict.fromkeys(_ENV_2025_KEYS), publicNetworkAccess="Enabled")
    if versions.shape_2025(_SINCE_2025_10):
        body["properties"].update(dict.fromkeys(("availabilityZones", "diskEncryptionConfiguration")))
    return body


_ENV_2025_KEYS = ("appInsightsConfiguration", "ingressConfiguration", "openTelemetryConfiguration")
_SINCE_2025_10 = versions.SHAPE_2025_10_SINCE


def _app_logs(config: Any) -> dict[str, Any]:
    """Echo the logs destination, never the Log Analytics shared key (ARM answers it as null)."""
    if not isinstance(config, dict):
        return {"destination": None, "logAnalyticsConfiguration": None}
    analytics = config.get("logAnalyticsConfiguration")
    if isinstance(analytics, dict):
        analytics = {**analytics, "sharedKey": None}
    return {**config, "logAnalyticsConfiguration": analytics}


def env_id(ctx: Ctx, rg: str, env: str) -> str:
    return f"{rg_path(ctx, rg)}/{RP}/managedEnvironments/{env}"


def app_body(ctx: Ctx, app: App) -> dict[str, Any]:
    state = models.app_state(ctx, app)
    ready = state == "Succeeded"
    ingress = (app.configuration or {}).get("ingress")
    config = defaults.app_configuration_answer(app.configuration)
    if ingress:
        fqdn = f"{app.name}.{_env_domain(ctx, app)}"
        config["ingress"] = {"traffic": defaults.DEFAULT_TRAFFIC, **ingress, "fqdn": fqdn}
    return {
        "id": f"{rg_path(ctx, app.rg)}/{RP}/containerapps/{app.name}",  # lower-case, as recorded
        "name": app.name,
        "type": "Microsoft.App/containerApps",
        "location": catalog.display_location(app.location),
        "tags": app.tags,
        "systemData": _system_data(app.created),
        "identity": app.identity,
        "properties": {
            "provisioningState": state,
            "runningStatus": "Stopped" if app.stopped else "Running",
            "managedEnvironmentId": env_id(ctx, app.env_rg, app.env),
            "environmentId": env_id(ctx, app.env_rg, app.env),
            "workloadProfileName": app.profile_name,
            "outboundIpAddresses": ["20.75.1.10"],
            "latestRevisionName": app.latest_revision if ready else "",
            # recorded: it stays on the previous revision until the new one is ready
            "latestReadyRevisionName": app.latest_revision if ready else app.ready_revision,
            "latestRevisionFqdn": f"{app.latest_revision}.{_env_domain(ctx, app)}" if ingress else "",
            "customDomainVerificationId": DOMAIN_VERIFICATION_ID,
            "configuration": config,
            "template": defaults.app_template_answer(app.template),
            "eventStreamEndpoint": data_url(ctx, app.rg, f"containerApps/{app.name}/eventstream"),
            "delegatedIdentities": [],
            **({"patchingMode": "Automatic"} if versions.shape_2025(_SINCE_2025_10) else {}),  # recorded
        },
    }


# Recorded (2025): what a PUT's answer leaves out that a GET then shows.
_APP_PUT_OMITS = (
    "eventStreamEndpoint",
    "latestReadyRevisionName",
    "latestRevisionFqdn",
    "latestRevisionName",
    "runningStatus",
)


def put_answer(body: dict[str, Any], *, created: bool) -> dict[str, Any]:
    """The answer to a PUT of an app or environment: from 2025 on, its GET body less what Azure fills
    in later (a new environment has no static IP yet); the 2023-2024 answers were the whole body."""
    if not versions.shape_2025():
        return body
    props = body["properties"]
    omit = _APP_PUT_OMITS if body["type"] == "Microsoft.App/containerApps" else ("staticIp",) * created
    return {**body, "properties": {k: v for k, v in props.items() if k not in omit}}


def _env_domain(ctx: Ctx, app: App) -> str:
    env = ctx.state.envs.get(key(app.env_rg, app.env))
    return env.default_domain if env else f"{app.location}.azurecontainerapps.io"


def revision_running_state(rev: Revision) -> str:
    """Running, Processing while a replica starts, Degraded while one restarts or fails its startup
    probe (that the probe's failure reads Degraded is UNCONFIRMED: both values are the spec's)."""
    if not rev.active or not rev.replicas:
        return "Stopped" if not rev.active else "Running"
    phases = {r.phase for r in rev.replicas.values()}
    if "Waiting" in phases or any(r.unhealthy for r in rev.replicas.values()):
        return "Degraded"
    if phases == {"Running"}:
        return "Running"
    return "Processing"


def revision_health(rev: Revision) -> str:
    """Unhealthy while a replica of it fails its startup probe (the spec's `healthState` values:
    Healthy, Unhealthy, None); Healthy once running or stopped; None while it starts."""
    if any(r.unhealthy and not r.gone for r in rev.replicas.values()):
        return "Unhealthy"
    return "Healthy" if revision_running_state(rev) in ("Running", "Stopped") else "None"


def revision_body(ctx: Ctx, app: App, rev: Revision) -> dict[str, Any]:
    return {
        "id": f"{rg_path(ctx, app.rg)}/{RP}/containerApps/{app.name}/revisions/{rev.name}",
        "name": rev.name,
        "type": "Microsoft.App/containerapps/revisions",
        "properties": {
            "createdTime": iso_offset(rev.created),
            "fqdn": f"{rev.name}.{_env_domain(ctx, app)}",
            "template": rev.template,
            "active": rev.active,
            "replicas": len(rev.replicas) + rev.unplaced,
            # recorded: an app without ingress takes no traffic, so its revision's weight is 0
            "trafficWeight": 100 if rev.active and (app.configuration or {}).get("ingress") else 0,
            "healthState": revision_health(rev),
            "provisioningState": "Provisioned" if rev.active else "Deprovisioned",
            "runningState": revision_running_state(rev),
        },
    }


def replica_body(ctx: Ctx, rep: Replica, *, path: str) -> dict[str, Any]:
    """`path` is the data-plane path of the replica, e.g. `/subscriptions/.../revisions/r/replicas/x`."""
    running = rep.phase == "Running"
    containers = []
    for spec in rep.specs:
        endpoint = f"{path}/containers/{spec.name}"
        if running:
            c_state, c_details = "Running", rep.details
        elif rep.phase == "Terminated":
            c_state, c_details = "Terminated", f"Container exited with code {rep.exit_code}"
        else:
            c_state, c_details = "Waiting", rep.details or _waiting_reason(rep.phase)
        containers.append(
            {
                "name": spec.name,
                "containerId": f"containerd://{abs(hash((rep.name, spec.name))):032x}"[:45],
                "ready": running,
                "started": running,
                "restartCount": rep.restart_count,
                "runningState": c_state,
                "runningStateDetails": c_details,
                "logStreamEndpoint": f"{ctx.endpoint}{endpoint}/logstream",
                "execEndpoint": f"{ctx.ws_endpoint}{endpoint}/exec",
            }
        )
    return {
        "name": rep.name,
        "type": "Microsoft.App/containerapps/revisions/replicas",
        "properties": {
            "createdTime": iso_z(rep.created),
            "runningState": "Running" if running else "NotRunning",
            "runningStateDetails": ""
            if running
            else (rep.details if rep.stuck else "") or _waiting_reason(rep.phase),
            "containers": containers,
            "initContainers": [],
        },
    }


def _replica_details(rep: Replica) -> str:
    """An unplaced replica says why ("WorkLoad Profile Full"); otherwise the phase's reason."""
    return (rep.details if rep.stuck else "") or _waiting_reason(rep.phase)


def _waiting_reason(phase: str) -> str:
    return {
        "AssigningReplica": "AssigningReplica",
        "PullingImage": "PullingImage",
        "Creating": "ContainerCreating",
        "Starting": "ContainerCreating",
        "Waiting": "CrashLoopBackOff",
        "Terminated": "Completed",
    }.get(phase, phase)


def app_replica_body(ctx: Ctx, app: App, rev: Revision, rep: Replica) -> dict[str, Any]:
    data_path = f"{rg_path(ctx, app.rg)}/containerApps/{app.name}/revisions/{rev.name}/replicas/{rep.name}"
    body = replica_body(ctx, rep, path=data_path)
    body["id"] = (
        f"{rg_path(ctx, app.rg)}/{RP}/containerApps/{app.name}/revisions/{rev.name}/replicas/{rep.name}"
    )
    return {"id": body.pop("id"), **body}


def job_replica_body(ctx: Ctx, job: Job, ex: Execution, rep: Replica) -> dict[str, Any]:
    data_path = f"{rg_path(ctx, job.rg)}/jobs/{job.name}/executions/{ex.name}/replicas/{rep.name}"
    body = replica_body(ctx, rep, path=data_path)
    body["type"] = "Microsoft.App/containerapps/revisions/replicas"  # sic, as recorded (2025)
    return {
        "id": f"{rg_path(ctx, job.rg)}/{RP}/jobs/{job.name}/executions/{ex.name}/replicas/{rep.name}",
        **body,
    }


def job_body(ctx: Ctx, job: Job) -> dict[str, Any]:
    return {
        "id": f"{rg_path(ctx, job.rg)}/{RP}/jobs/{job.name}",
        "name": job.name,
        "type": "Microsoft.App/jobs",
        "location": catalog.display_location(job.location),
        "tags": job.tags,
        "systemData": _system_data(job.created),
        "identity": job.identity,
        "properties": {
            "provisioningState": models.job_state(ctx, job),
            **({"runningStatus": "Ready"} if versions.shape_2025(_SINCE_2025_10) else {}),  # recorded
            "environmentId": env_id(ctx, job.env_rg, job.env),
            "workloadProfileName": job.profile_name,
            "configuration": defaults.job_configuration_answer(job.configuration),
            "template": defaults.job_template_answer(job.template),
            # sic: the recorded job body points its event stream at containerApps/{job}
            "eventStreamEndpoint": data_url(ctx, job.rg, f"containerApps/{job.name}/eventstream"),
        },
    }


def execution_body(ctx: Ctx, job: Job, ex: Execution, *, detailed: bool = True) -> dict[str, Any]:
    """`detailed`: with `detailedStatus` (the replicas and their containers' codes), which newer
    api-versions answer and older ones leave out."""
    containers = []
    for c in ex.template.get("containers") or []:
        env = [e for e in c.get("env") or [] if e.get("name") not in _JOB_ENV]
        env += [
            {"name": "CONTAINER_APP_JOB_NAME", "value": job.name},
            {"name": "CONTAINER_APP_JOB_EXECUTION_NAME", "value": ""},
            {"name": "CONTAINER_APP_REPLICA_NAME", "value": ""},
        ]
        # recorded: an execution's containers list ephemeralStorage as "" when the job did not set it
        resources = {"ephemeralStorage": "", **(c.get("resources") or {})}
        containers.append({**c, "env": env, "resources": resources})
    props: dict[str, Any] = {
        "status": placement.shown_status(ctx.runtime, ex),
        "startTime": iso_offset(ex.started),
        "template": {"containers": containers, "initContainers": ex.template.get("initContainers") or []},
    }
    if ex.ended is not None:
        props["endTime"] = iso_offset(ex.ended)
    if ex.reason:
        props["reason"] = ex.reason
        props["message"] = ex.message
    replicas = []
    for name in ex.replica_names:
        rep = ex.replicas.get(name)
        running = ex.status == "Running"
        # recorded: Azure answers -1 for every container while the execution runs; a code is final
        # only once the execution is
        code = -1 if running else (rep.exit_code if rep else ex.codes.get(name))
        status = (rep.phase if rep else "Terminated") if running else "Terminated"
        replicas.append(
            {
                "name": name,
                "containers": [
                    {"name": c.get("name"), "code": code, "status": status, "additionalInformation": None}
                    for c in containers
                ],
            }
        )
    if detailed:
        props["detailedStatus"] = {"replicas": replicas}
    return {
        "id": f"{rg_path(ctx, job.rg)}/{RP}/jobs/{job.name}/executions/{ex.name}",
        "name": ex.name,
        "type": "Microsoft.App/jobs/executions",
        "properties": props,
    }


_JOB_ENV = {"CONTAINER_APP_JOB_NAME", "CONTAINER_APP_JOB_EXECUTION_NAME", "CONTAINER_APP_REPLICA_NAME"}
