"""`acagpu guard`: cost safety that needs neither a laptop nor CI, a scheduled reaper inside Azure.

`install` creates, in a resource group of its own, a Consumption-only environment (no GPU: nothing
bills while it idles) and a schedule-triggered Container Apps job that runs the standalone guard
script (templates/guard/) in a stock Python image every period. The job's system-assigned identity
gets the least-privilege custom role `acagpu ci init` defines ("acagpu runner"), at subscription
scope, and the script deletes expired `acagpu:managed=true` groups with the rules of `acagpu reap`.

The guard's own group is tagged `acagpu:managed=true` **and** `acagpu:keep=true` (plus
`acagpu:role=guard`): keep=true is what every reaper (`acagpu reap`, the guard itself) skips, and
managed=true lets `guard uninstall` remove it through the one delete path (teardown.py) like any
acagpu group. `acagpu status` does not list it as a run.

Before anything is created, the caller's permissions are read: without the right to assign roles
(and, when the role does not exist yet, to create it) install stops and says which role an
administrator must grant, with the exact commands.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aca_gpu import guard as guard_container
from aca_gpu import naming
from aca_gpu.config import Settings
from aca_gpu.errors import AuthError, BadInput, PreflightRefused
from aca_gpu.output import NullProgress, Progress
from aca_gpu.workflow.base import notify
from aca_gpu.workflow.ci.ci_init import ROLE_NAME
from aca_gpu.workflow.guard import scope

if TYPE_CHECKING:
    from aca_gpu.azure.clients import Clients
    from aca_gpu.models import ExecutionInfo

ASSIGN, DEFINE, allowed = scope.ASSIGN, scope.DEFINE, scope.allowed  # ARM's permission rule
RESOURCE_GROUP = "rg-acagpu-guard"
ENVIRONMENT = "cae-acagpu-guard"
JOB = "acagpu-guard"
DEFAULT_EVERY = "15m"
DEFAULT_IMAGE = guard_container.DEFAULT_IMAGE
REPLICA_TIMEOUT_S = 1800
REGISTER_TIMEOUT_S = 15 * 60.0
TAG_LAST_RUN = "acagpu:guard-last-run"  # written by the guard script after each run
TAG_LAST_DELETION = "acagpu:guard-last-deletion"  # ... and after each run that deleted something


def every_to_cron(text: str) -> str:
    """`15m` → `*/15 * * * *`; hours run at minute 7, off the hour. A period must divide an hour or
    a day, so every run is the same distance from the last."""
    seconds = int(naming.parse_ttl(text, "--every").total_seconds())
    minutes, rest = divmod(seconds, 60)
    if rest or minutes < 1:
        raise BadInput(f"invalid --every {text!r}: use whole minutes, e.g. 15m or 1h")
    if minutes < 60 and 60 % minutes == 0:
        return f"*/{minutes} * * * *" if minutes > 1 else "* * * * *"
    hours, rest = divmod(minutes, 60)
    if not rest and hours <= 24 and 24 % hours == 0:
        return f"7 */{hours} * * *" if hours < 24 else "7 3 * * *"
    raise BadInput(
        f"invalid --every {text!r}: a period that divides an hour (1m-30m, 60m) or a day (1h-24h), e.g. 15m"
    )


@dataclass(frozen=True)
class InstallRequest:
    location: str
    every: str = DEFAULT_EVERY
    dry_run: bool = False
    image: str = guard_container.DEFAULT_IMAGE
    scopes: tuple[str, ...] = ()  # further subscriptions to guard (`--scope`), beyond the guard's own
    notify: str | None = None  # a Slack or Teams incoming webhook for each run that acted


def _tags(owner: str) -> dict[str, str]:
    return {
        naming.TAG_MANAGED: "true",
        naming.TAG_KEEP: "true",
        naming.TAG_ROLE: "guard",
        naming.TAG_CREATED_AT: naming.iso_utc(datetime.now(UTC)),
        naming.TAG_OWNER: owner,
    }


def _clients(settings: Settings) -> Clients:
    from aca_gpu.azure.clients import make_clients

    return make_clients(settings)


def install(settings: Settings, req: InstallRequest, *, progress: Progress | None = None) -> dict[str, Any]:
    from aca_gpu.azure import guard as az
    from aca_gpu.azure import resources
    from aca_gpu.workflow.base.context import open_cloud, resolve_owner

    progress = progress or NullProgress()
    location = naming.validate_location(req.location)
    cron = every_to_cron(req.every)
    clients = _clients(settings)
    sub = clients.subscription_id
    subs = scope.parse_scopes(sub, req.scopes)
    with progress.step("check your permissions") as step:
        plan = scope.preflight(clients, subs)
        if plan.missing:
            raise scope.refusal(plan.missing, az.caller(clients), subs, "nothing was created", plan.role)
        if plan.unknown:
            step.update("ARM does not list them everywhere; the role assignments will tell")
        else:
            where = f" in {len(subs)} subscriptions" if len(subs) > 1 else ""
            step.update("may assign roles" + ("" if plan.role else " and define the role") + where)
    cloud = open_cloud(settings)
    with progress.step("provider Microsoft.App") as step:
        if cloud.provider_registered("Microsoft.App"):
            step.update("registered")
        else:
            cloud.register_provider("Microsoft.App", timeout=REGISTER_TIMEOUT_S)
            step.update("registered now")
    with progress.step(f"role {ROLE_NAME!r}") as step:
        existed, widened = plan.role is not None, bool(plan.role_needs_scopes)
        role_id = scope.ensure_role(plan)
        step.update("exists" if existed and not widened else "widened" if existed else "created")
    tags = _tags(resolve_owner(settings))
    with progress.step(f"resource group {RESOURCE_GROUP}"):
        resources.create_resource_group(clients, RESOURCE_GROUP, location, tags)
    with progress.step(f"environment {ENVIRONMENT} (Consumption only)"):
        env_id = az.create_consumption_environment(clients, RESOURCE_GROUP, ENVIRONMENT, location, tags)
    container = guard_container.guard_container(_script_env(settings, req, subs), image=req.image)
    with progress.step(f"scheduled job {JOB} ({cron})"):
        job = az.create_scheduled_job(
            clients,
            RESOURCE_GROUP,
            JOB,
            location=location,
            environment_id=env_id,
            cron=cron,
            image=container.image,
            command=container.command,
            env=container.env,
            tags=tags,
            replica_timeout_s=REPLICA_TIMEOUT_S,
            secret_env={"ACAGPU_NOTIFY": req.notify} if req.notify else None,
        )
    if not job.principal_id:
        raise PreflightRefused(f"job {JOB} came back without a managed identity; nothing can sign in as it")
    with progress.step(f"assign {ROLE_NAME!r} to the job's identity") as step:
        try:
            assignments = scope.assign_everywhere(plan, job.principal_id)
        except AuthError as exc:
            if (exc.code or "").lower() != "authorizationfailed":
                raise
            # the permission listing was not available: undo what was made (nothing of it bills)
            from aca_gpu.workflow.engine.teardown import teardown_group

            scope.unassign_everywhere(clients, subs, job.principal_id)
            teardown_group(cloud, RESOURCE_GROUP, wait_gone=False)
            lacking = {s: [scope.ASSIGN] for s in (plan.unknown or subs)}
            done = f"what install had made ({RESOURCE_GROUP}) is deleted"
            raise scope.refusal(lacking, az.caller(clients), subs, done, plan.role) from exc
        step.update(f"{len(assignments)} subscription(s)")
    return {
        "schema": 1,
        "kind": "guard",
        "action": "install",
        "subscription": sub,
        "subscriptions": list(subs),
        "resource_group": RESOURCE_GROUP,
        "environment": ENVIRONMENT,
        "job": JOB,
        "location": location,
        "every": req.every,
        "cron": cron,
        "dry_run": req.dry_run,
        "notify": notify.where(req.notify) if req.notify else None,
        "image": container.image,
        "principal_id": job.principal_id,
        "role": {"name": ROLE_NAME, "id": role_id, "scope": f"/subscriptions/{sub}"},
        "role_scopes": [scope.scope_of(s) for s in subs],
        "role_assignment": assignments[0],
        "role_assignments": assignments,
        "tags": tags,
    }


def _script_env(settings: Settings, req: InstallRequest, subs: Sequence[str]) -> dict[str, str]:
    """The guard script's settings: where to sweep, how, and whom to tell (with list prices)."""
    env = {
        "ACAGPU_SUBSCRIPTION": subs[0],
        "ACAGPU_GUARD_GROUP": RESOURCE_GROUP,
        "ACAGPU_GUARD_DRY_RUN": "true" if req.dry_run else "false",
    }
    if len(subs) > 1:
        env["ACAGPU_GUARD_SUBSCRIPTIONS"] = ",".join(subs[1:])
    if req.notify:  # the URL itself travels as a job secret (create_scheduled_job's secret_env)
        env["ACAGPU_GUARD_PRICES"] = json.dumps(_hourly_prices(), separators=(",", ":"))
        env["ACAGPU_GUARD_NODES"] = ",".join(_node_aliases())  # dedicated: the node bills its age
    if settings.arm_endpoint:  # a sovereign cloud or the emulator: the script calls the same ARM
        env["ACAGPU_ARM_ENDPOINT"] = settings.arm_endpoint
    return env


def _hourly_prices() -> dict[str, float]:
    """USD per hour of one GPU replica (or node) per alias, for the guard's messages."""
    from aca_gpu import cost
    from aca_gpu.errors import AcaGpuError
    from aca_gpu.gpu.profiles import valid_aliases

    prices: dict[str, float] = {}
    for alias in valid_aliases():
        try:
            prices[alias] = round(cost.price_per_hour(alias), 4)
        except AcaGpuError:
            continue
    return prices


def _node_aliases() -> list[str]:
    """The aliases of dedicated profiles, whose node bills the group's whole age (spend.so_far)."""
    from aca_gpu.gpu.profiles import resolve_profile, valid_aliases

    return [alias for alias in valid_aliases() if not resolve_profile(alias).serverless]


def status(settings: Settings, *, limit: int = 10) -> dict[str, Any]:
    from aca_gpu.azure import guard as az
    from aca_gpu.azure import resources

    clients = _clients(settings)
    group = resources.get_resource_group(clients, RESOURCE_GROUP)
    job = az.get_scheduled_job(clients, RESOURCE_GROUP, JOB) if group is not None else None
    doc: dict[str, Any] = {
        "schema": 1,
        "kind": "guard",
        "action": "status",
        "installed": job is not None,
        "resource_group": RESOURCE_GROUP if group is not None else None,
        "job": JOB if job is not None else None,
    }
    if group is None or job is None:
        return doc
    runs = sorted(az.executions(clients, RESOURCE_GROUP, JOB), key=lambda e: e.start_time or "", reverse=True)
    assignments = az.assignments_of(clients, job.principal_id) if job.principal_id else []
    doc.update(
        location=group.location,
        cron=job.cron,
        dry_run=_dry_run_of(clients, job),
        principal_id=job.principal_id,
        role_assignments=[a.get("id") for a in assignments],
        last_run=group.tags.get(TAG_LAST_RUN),
        last_deletion=group.tags.get(TAG_LAST_DELETION),
        executions=[
            {
                "name": e.name,
                "status": e.status,
                "start_time": e.start_time,
                "end_time": e.end_time,
                "exit_code": next((c for c in e.exit_codes if c), e.exit_codes[0] if e.exit_codes else None),
                "reason": why_failed(e, assigned=bool(assignments)),
            }
            for e in runs[:limit]
        ],
    )
    last_run = str(group.tags.get(TAG_LAST_RUN) or "")
    failed_now = next((e for e in doc["executions"] if e["reason"]), None)
    if (
        failed_now is not None
        and failed_now is doc["executions"][0]
        and " failed 0" not in last_run
        and last_run
    ):
        failed_now["reason"] += f"; its summary: {last_run}"  # the latest run failed and said why
    return doc


# what the guard script's exit codes mean (templates/guard/acagpu_guard.py)
SCRIPT_EXITS = {
    2: "the guard's settings are incomplete (ACAGPU_SUBSCRIPTION)",
    6: "a subscription could not be swept or a delete failed (e.g. ARM refused the identity: "
    "AuthorizationFailed while its role assignment was not effective)",
}


def why_failed(execution: ExecutionInfo, *, assigned: bool) -> str | None:
    """Why a guard execution failed, from what the platform keeps after its log is gone: the
    script's exit code, the execution's own reason, and whether the identity still holds a role."""
    if (execution.status or "") != "Failed":
        return None
    parts: list[str] = []
    code = next((c for c in execution.exit_codes if c), None)
    if code is not None:
        parts.append(f"exit {code}: {SCRIPT_EXITS.get(code, 'the guard script failed')}")
    said = " ".join(filter(None, (execution.reason, execution.message)))
    if said:
        parts.append(said)
    if not assigned:
        parts.append("its identity holds no role assignment (`acagpu guard install` again)")
    return "; ".join(parts) or "the platform gave no reason (the job's log in Log Analytics may)"


def _job_env(clients: Clients, name: str) -> str | None:
    """One of the guard script's settings, read back from its job (None when unreadable)."""
    from aca_gpu.azure.resources import as_json

    try:
        body = as_json(clients.apps.jobs.get(RESOURCE_GROUP, JOB))
    except Exception:  # a nicety of the listing, not worth failing it
        return None
    for container in (body.get("properties") or {}).get("template", {}).get("containers") or []:
        for item in container.get("env") or []:
            if item.get("name") == name:
                return str(item.get("value"))
    return None


def _dry_run_of(clients: Clients, job: Any) -> bool | None:
    value = _job_env(clients, "ACAGPU_GUARD_DRY_RUN")
    return None if value is None else value.lower() == "true"


def _guarded_elsewhere(clients: Clients) -> list[str]:
    """The further subscriptions the installed guard sweeps (`--scope`)."""
    value = _job_env(clients, "ACAGPU_GUARD_SUBSCRIPTIONS") or ""
    return [s.strip().lower() for s in value.split(",") if s.strip()]


def uninstall(settings: Settings, *, progress: Progress | None = None, poll: float = 5.0) -> dict[str, Any]:
    """Role assignments first (they outlive the identity otherwise), then the group, verified gone."""
    from aca_gpu.azure import guard as az
    from aca_gpu.workflow.base.context import open_cloud
    from aca_gpu.workflow.engine.teardown import teardown_group

    progress = progress or NullProgress()
    clients = _clients(settings)
    job = az.get_scheduled_job(clients, RESOURCE_GROUP, JOB)
    removed: list[str] = []
    if job is not None and job.principal_id:
        with progress.step("remove the identity's role assignments") as step:
            subs = [clients.subscription_id.lower(), *_guarded_elsewhere(clients)]
            removed = scope.unassign_everywhere(clients, subs, job.principal_id)
            step.update(f"{len(removed)} removed")
    with progress.step(f"delete {RESOURCE_GROUP}") as step:
        result = teardown_group(open_cloud(settings), RESOURCE_GROUP, wait_gone=True, poll=poll)
        step.update(result.status)
    return {
        "schema": 1,
        "kind": "guard",
        "action": "uninstall",
        "resource_group": RESOURCE_GROUP,
        "role_assignments_removed": removed,
        "teardown": result.as_dict(),
    }


def render_status(doc: Mapping[str, Any]) -> str:
    if not doc.get("installed"):
        return "no guard installed (acagpu guard install -l LOCATION)"
    mode = "dry run" if doc.get("dry_run") else "deletes"
    lines = [
        f"guard {doc['job']} in {doc['resource_group']} ({doc.get('location')}), "
        f"schedule {doc.get('cron')}, {mode}",
        f"identity {doc.get('principal_id')}: {len(doc.get('role_assignments') or [])} role assignment(s)",
        f"last run: {doc.get('last_run') or 'none recorded yet'}",
        f"last deletion: {doc.get('last_deletion') or 'none yet'}",
    ]
    runs = doc.get("executions") or []
    lines.append("executions:" if runs else "executions: none yet")
    for e in runs:
        lines.append(f"  {e['name']:<28} {e.get('status') or '?':<10} {e.get('start_time') or ''}")
        if e.get("reason"):
            lines.append(f"    why: {e['reason']}")
    return "\n".join(lines)
