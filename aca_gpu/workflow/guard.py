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

import fnmatch
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
from aca_gpu.workflow.ci_init import ROLE_NAME, role_definition

if TYPE_CHECKING:
    from aca_gpu.azure.clients import Clients

RESOURCE_GROUP = "rg-acagpu-guard"
ENVIRONMENT = "cae-acagpu-guard"
JOB = "acagpu-guard"
DEFAULT_EVERY = "15m"
DEFAULT_IMAGE = guard_container.DEFAULT_IMAGE
REPLICA_TIMEOUT_S = 1800
REGISTER_TIMEOUT_S = 15 * 60.0
TAG_LAST_RUN = "acagpu:guard-last-run"  # written by the guard script after each run
TAG_LAST_DELETION = "acagpu:guard-last-deletion"  # ... and after each run that deleted something
ASSIGN = "Microsoft.Authorization/roleAssignments/write"
DEFINE = "Microsoft.Authorization/roleDefinitions/write"
ADMIN_ROLES = ("Owner", "User Access Administrator", "Role Based Access Control Administrator")


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


def allowed(permissions: Sequence[Mapping[str, Sequence[str]]], action: str) -> bool:
    """ARM's rule: some entry's actions match and none of its notActions do (`*` globs, any case)."""

    def match(pattern: str) -> bool:
        return fnmatch.fnmatchcase(action.lower(), pattern.lower())

    return any(
        any(match(a) for a in p.get("actions", [])) and not any(match(n) for n in p.get("notActions", []))
        for p in permissions
    )


def admin_commands(
    subscription: str, object_id: str | None, missing: Sequence[str], principal_type: str | None = None
) -> list[str]:
    """What an administrator runs so that this caller can install the guard (or runs it themselves).
    The principal type is the caller's own (an application in CI is a ServicePrincipal); unknown,
    it is left out and `az` looks it up."""
    scope = f"/subscriptions/{subscription}"
    who = object_id or "<your object id: az ad signed-in-user show --query id -o tsv>"
    kind = f" --assignee-principal-type {principal_type}" if principal_type else ""
    lines = [
        f'az role assignment create --role "Role Based Access Control Administrator" --scope {scope} '
        f'--assignee-object-id "{who}"{kind}',
    ]
    if DEFINE in missing:
        role = json.dumps(role_definition(subscription), separators=(",", ":"))
        lines.append(f"az role definition create --role-definition '{role}'")
    return lines


def _refusal(
    subscription: str, missing: Sequence[str], who: tuple[str | None, str | None], done: str
) -> PreflightRefused:
    rights = {ASSIGN: "assign roles", DEFINE: "define roles"}
    lacking = " or ".join(f"{rights[a]} ({a})" for a in missing)
    return PreflightRefused(
        f"you may not {lacking} on /subscriptions/{subscription}, which installing the guard needs; "
        f"{done}. An administrator ({' or '.join(ADMIN_ROLES[:2])}) can run `acagpu guard install` "
        "instead, or run the commands below and you run it again",
        code="AuthorizationFailed",
        hint=" && ".join(admin_commands(subscription, who[0], missing, who[1])),
    )


@dataclass(frozen=True)
class InstallRequest:
    location: str
    every: str = DEFAULT_EVERY
    dry_run: bool = False
    image: str = guard_container.DEFAULT_IMAGE


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
    from aca_gpu.workflow.context import open_cloud, resolve_owner

    progress = progress or NullProgress()
    location = naming.validate_location(req.location)
    cron = every_to_cron(req.every)
    clients = _clients(settings)
    sub = clients.subscription_id
    with progress.step("check your permissions") as step:
        permissions = az.caller_permissions(clients)
        role = az.find_role(clients, ROLE_NAME)
        needed = [ASSIGN] + ([] if role is not None else [DEFINE])
        if permissions is None:
            step.update("ARM does not list them here; the role assignment will tell")
        else:
            missing = [a for a in needed if not allowed(permissions, a)]
            if missing:
                raise _refusal(sub, missing, az.caller(clients), "nothing was created")
            step.update("may assign roles" + ("" if role else " and define the role"))
    cloud = open_cloud(settings)
    with progress.step("provider Microsoft.App") as step:
        if cloud.provider_registered("Microsoft.App"):
            step.update("registered")
        else:
            cloud.register_provider("Microsoft.App", timeout=REGISTER_TIMEOUT_S)
            step.update("registered now")
    with progress.step(f"role {ROLE_NAME!r}") as step:
        if role is None:
            role = az.create_role(clients, role_definition(sub))
            step.update("created")
        else:
            step.update("exists")
    role_id = str(role["id"])
    tags = _tags(resolve_owner(settings))
    with progress.step(f"resource group {RESOURCE_GROUP}"):
        resources.create_resource_group(clients, RESOURCE_GROUP, location, tags)
    with progress.step(f"environment {ENVIRONMENT} (Consumption only)"):
        env_id = az.create_consumption_environment(clients, RESOURCE_GROUP, ENVIRONMENT, location, tags)
    settings_env = {
        "ACAGPU_SUBSCRIPTION": sub,
        "ACAGPU_GUARD_GROUP": RESOURCE_GROUP,
        "ACAGPU_GUARD_DRY_RUN": "true" if req.dry_run else "false",
    }
    if settings.arm_endpoint:  # a sovereign cloud or the emulator: the script calls the same ARM
        settings_env["ACAGPU_ARM_ENDPOINT"] = settings.arm_endpoint
    container = guard_container.guard_container(settings_env, image=req.image)
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
        )
    if not job.principal_id:
        raise PreflightRefused(f"job {JOB} came back without a managed identity; nothing can sign in as it")
    with progress.step(f"assign {ROLE_NAME!r} to the job's identity"):
        try:
            assignment = az.assign_role(clients, role_id, job.principal_id)
        except AuthError as exc:
            if (exc.code or "").lower() != "authorizationfailed":
                raise
            # the permission listing was not available: undo what was made (nothing of it bills)
            from aca_gpu.workflow.teardown import teardown_group

            teardown_group(cloud, RESOURCE_GROUP, wait_gone=False)
            raise _refusal(
                sub,
                [ASSIGN],
                az.caller(clients),
                f"what install had made ({RESOURCE_GROUP}) is deleted",
            ) from exc
    return {
        "schema": 1,
        "kind": "guard",
        "action": "install",
        "subscription": sub,
        "resource_group": RESOURCE_GROUP,
        "environment": ENVIRONMENT,
        "job": JOB,
        "location": location,
        "every": req.every,
        "cron": cron,
        "dry_run": req.dry_run,
        "image": container.image,
        "principal_id": job.principal_id,
        "role": {"name": ROLE_NAME, "id": role_id, "scope": f"/subscriptions/{sub}"},
        "role_assignment": assignment,
        "tags": tags,
    }


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
            {"name": e.name, "status": e.status, "start_time": e.start_time, "end_time": e.end_time}
            for e in runs[:limit]
        ],
    )
    return doc


def _dry_run_of(clients: Clients, job: Any) -> bool | None:
    from aca_gpu.azure.resources import as_json

    try:
        body = as_json(clients.apps.jobs.get(RESOURCE_GROUP, JOB))
    except Exception:  # the flag is a nicety of the listing, not worth failing it
        return None
    for container in (body.get("properties") or {}).get("template", {}).get("containers") or []:
        for item in container.get("env") or []:
            if item.get("name") == "ACAGPU_GUARD_DRY_RUN":
                return str(item.get("value")).lower() == "true"
    return None


def uninstall(settings: Settings, *, progress: Progress | None = None, poll: float = 5.0) -> dict[str, Any]:
    """Role assignments first (they outlive the identity otherwise), then the group, verified gone."""
    from aca_gpu.azure import guard as az
    from aca_gpu.workflow.context import open_cloud
    from aca_gpu.workflow.teardown import teardown_group

    progress = progress or NullProgress()
    clients = _clients(settings)
    job = az.get_scheduled_job(clients, RESOURCE_GROUP, JOB)
    removed: list[str] = []
    if job is not None and job.principal_id:
        with progress.step("remove the identity's role assignments") as step:
            for assignment in az.assignments_of(clients, job.principal_id):
                az.delete_assignment(clients, str(assignment["id"]))
                removed.append(str(assignment["id"]))
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
    lines += [f"  {e['name']:<28} {e.get('status') or '?':<10} {e.get('start_time') or ''}" for e in runs]
    return "\n".join(lines)
