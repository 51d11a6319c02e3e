#!/usr/bin/env python3
"""acagpu guard: delete expired acagpu resource groups from inside Azure, on a schedule.

Runs as a scheduled Container Apps job (`acagpu guard install`), injected into a stock Python image
the way acagpu's tester is (the source travels in an environment variable; nothing is built or
pushed). Standard library only. It signs in with the job's managed identity (IDENTITY_ENDPOINT +
IDENTITY_HEADER), lists the subscription's groups tagged acagpu:managed=true through ARM's REST
API and deletes the expired ones with the rules of `acagpu reap`:

- never a group without acagpu:managed=true, never one tagged acagpu:keep=true;
- expired = acagpu:expires-at in the past (or, with ACAGPU_GUARD_OLDER_THAN_S, created longer ago);
- right before deleting, the group is read again and the rules applied to its fresh tags;
- billing stops first: the group's container apps and jobs are deleted, then the group;
- a queue run's role assignments and queues, which live in its environment's storage account, go
  after its group (each only when it names the run: an assignment's description, a queue's
  metadata `acagpu_run_id`).

Every decision is one log line `acagpu-guard {json}`; the last line sums the run up, and the same
summary is written to the tag acagpu:guard-last-run of the guard's own resource group (ACAGPU_GUARD_GROUP),
so `acagpu guard status` can say what the last run deleted after the execution's console is gone.
Exit 0 when every delete went through, 6 when one did not, 2 when the configuration is unusable.

Environment: ACAGPU_SUBSCRIPTION (required), ACAGPU_ARM_ENDPOINT (default Azure's),
ACAGPU_GUARD_DRY_RUN=true (decide and log, delete nothing), ACAGPU_GUARD_OLDER_THAN_S,
ACAGPU_GUARD_EXCLUDES (comma-separated glob patterns of group names), ACAGPU_GUARD_WAIT_S (how long
to wait for a subscription's deleted groups to be gone, all of them together: every delete is sent
first, then one listing per round; default 1200), ACAGPU_GUARD_SUBSCRIPTIONS (further
subscriptions to sweep, comma-separated: `guard install --scope`), ACAGPU_NOTIFY (a Slack or Teams
incoming webhook: one message per run that deleted, would delete or failed to delete something),
ACAGPU_GUARD_PRICES (JSON {gpu alias: USD per hour}, for the message's estimated cost).

ARM throttling: a 429 waits for its Retry-After and is sent again, not counted as a try, for up to
THROTTLED_FOR_S; a run never gives up a group because of throttling alone.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

TAG_MANAGED = "acagpu:managed"
TAG_KEEP = "acagpu:keep"
TAG_RUN_ID = "acagpu:run-id"
TAG_CREATED_AT = "acagpu:created-at"
TAG_EXPIRES_AT = "acagpu:expires-at"
TAG_ROLE = "acagpu:role"
TAG_KIND = "acagpu:kind"
TAG_ENV = "acagpu:env"
TAG_SERVED = "acagpu:served"  # a served run's group names its app: scaled to zero before its delete
TAG_QUEUE = "acagpu:queue"  # a queue run's Event job: `account=...;items=...` (its queues' account)
QUEUE_OWNER = "acagpu_run_id"  # a queue's metadata naming the run that made it
KIND_ENV = (
    "env"  # a warm environment (`acagpu env create`): removed when idle past its TTL, never with a run inside
)
TAG_LAST_RUN = "acagpu:guard-last-run"
TAG_LAST_DELETION = "acagpu:guard-last-deletion"  # the last run that deleted (or failed to delete) something
TAG_VALUE_MAX = 256  # ARM's limit on a tag value
ARM = "https://management.azure.com"
ARM_RESOURCE = "https://management.azure.com/"
RESOURCES_API = "2021-04-01"
APP_API = "2025-07-01"  # a stable Microsoft.App version every region serves
STORAGE_API = "2023-05-01"
AUTH_API = "2022-04-01"
IDENTITY_API = "2019-08-01"
EXIT_BAD_CONFIG = 2
EXIT_INCOMPLETE = 6
LOG_PREFIX = "acagpu-guard"
THROTTLED_FOR_S = 1800.0
# A role assignment takes minutes to take effect after ARM accepted it, and the schedule can fire
# first: a run refused (403) at its first read waits this long at most (ACAGPU_GUARD_AUTH_WAIT_S)
AUTH_WAIT_S = 600.0
NOTIFY_TIMEOUT_S = 10.0


# ---- the rules (the same as aca_gpu.workflow.fleet.reap.decide; a test keeps them equal) -------


def parse_iso_utc(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def human(seconds_total: float) -> str:
    seconds = int(seconds_total)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def decide(
    name: str,
    tags: dict[str, str] | None,
    now: datetime,
    older_than: timedelta | None = None,
    excludes: tuple[str, ...] = (),
    state: str | None = None,
) -> tuple[str, str]:
    """("delete" | "skip", why) for one resource group; `state` is its provisioningState."""
    tags = dict(tags or {})
    created = parse_iso_utc(tags.get(TAG_CREATED_AT, ""))
    if not (tags and tags.get(TAG_MANAGED) == "true"):
        return "skip", f"not tagged {TAG_MANAGED}=true"
    if (state or "").lower() == "deleting":  # its delete was accepted: not sent again
        return "skip", "being deleted (provisioningState Deleting)"
    if tags.get(TAG_KEEP, "").lower() == "true":
        return "skip", f"tagged {TAG_KEEP}=true"
    for pattern in excludes:
        if fnmatch.fnmatchcase(name, pattern):
            return "skip", f"excluded by pattern {pattern!r}"
    expires = parse_iso_utc(tags.get(TAG_EXPIRES_AT, ""))
    if tags.get(TAG_KIND) == KIND_ENV:  # a warm environment: its expiry is renewed by every run
        if expires is not None and expires <= now:
            return "delete", f"warm environment idle past its TTL (expired at {tags[TAG_EXPIRES_AT]})"
        if expires is not None:
            return "skip", f"warm environment in use or idle within its TTL (expires {tags[TAG_EXPIRES_AT]})"
        return "skip", "warm environment without an expiry tag"
    if expires is not None and expires <= now:
        return "delete", f"expired at {tags[TAG_EXPIRES_AT]}"
    if older_than is not None and created is not None and now - created >= older_than:
        return "delete", f"created {tags[TAG_CREATED_AT]}, older than {human(older_than.total_seconds())}"
    if expires is not None:
        return "skip", f"not expired (expires {tags[TAG_EXPIRES_AT]})"
    return "skip", "no expiry tag (use --older-than to include it)"


# ---- ARM over HTTPS with the managed identity's token ------------------------------------------


class ArmFailure(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Arm:
    def __init__(self, endpoint: str, token: str, timeout: float = 60.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Arm({self.endpoint!r}, token=<hidden>)"

    def call(
        self, method: str, path: str, api: str, query: dict[str, str] | None = None, body: Any = None
    ) -> Any:
        """One ARM call with a few tries on 429/5xx; 404 is None; other errors raise ArmFailure."""
        url = path if path.startswith("https://") else f"{self.endpoint}{path}"
        if "api-version=" not in url:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(
                {"api-version": api, **(query or {})}
            )
        attempt, patience_ends = 0, time.monotonic() + THROTTLED_FOR_S
        while attempt < 5:
            data = None if body is None else json.dumps(body).encode("utf-8")
            request = urllib.request.Request(url, data=data, method=method)
            if data is not None:
                request.add_header("Content-Type", "application/json")
            request.add_header("Authorization", f"Bearer {self._token}")
            request.add_header("Accept", "application/json")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    body = resp.read()
                    return json.loads(body) if body else {}
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                text = exc.read().decode("utf-8", "replace")
                wait = _retry_after(exc.headers, 2**attempt)
                if exc.code == 429 and time.monotonic() + wait < patience_ends:
                    time.sleep(wait)  # the rate was refused, not the request: not a try
                    continue
                if exc.code in (429, 500, 502, 503, 504) and attempt < 4:
                    time.sleep(wait)
                    attempt += 1
                    continue
                raise ArmFailure(exc.code, _arm_message(text) or f"HTTP {exc.code}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt < 4:
                    time.sleep(2**attempt)
                    attempt += 1
                    continue
                raise ArmFailure(0, f"cannot reach {self.endpoint}: {exc}") from None
        raise ArmFailure(0, "unreachable")

    def pages(self, path: str, api: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        doc = self.call("GET", path, api, query)
        while doc:
            items.extend(doc.get("value") or [])
            link = doc.get("nextLink")
            doc = self.call("GET", link, api) if link else None
        return items


def _retry_after(headers: Any, default: float) -> float:
    """`retry-after-ms`, else `Retry-After` seconds, else `default`; at most 60 s."""
    try:
        if headers.get("retry-after-ms"):
            return min(60.0, float(headers["retry-after-ms"]) / 1000)
        return min(60.0, float(headers.get("Retry-After") or default))
    except ValueError:
        return min(60.0, default)


def _arm_message(text: str) -> str:
    try:
        err = json.loads(text).get("error") or {}
        return f"{err.get('code')}: {err.get('message')}"
    except (ValueError, AttributeError):
        return text.strip()[:300]


def identity_token(env: dict[str, str]) -> str:
    """The job's managed identity token for ARM (the App Service form ACA gives containers)."""
    endpoint, header = env.get("IDENTITY_ENDPOINT"), env.get("IDENTITY_HEADER")
    if not endpoint or not header:
        raise SystemExit(_config_error("no managed identity: IDENTITY_ENDPOINT/IDENTITY_HEADER are not set"))
    query = urllib.parse.urlencode({"resource": ARM_RESOURCE, "api-version": IDENTITY_API})
    request = urllib.request.Request(f"{endpoint}?{query}", headers={"X-IDENTITY-HEADER": header})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            token = json.loads(resp.read())["access_token"]
    except (urllib.error.URLError, ValueError, KeyError) as exc:
        raise SystemExit(_config_error(f"could not get a token from the managed identity: {exc}")) from None
    return str(token)


# ---- one sweep ---------------------------------------------------------------------------------


def log(event: dict[str, Any]) -> None:
    print(f"{LOG_PREFIX} {json.dumps(event, sort_keys=True)}", flush=True)


def _config_error(message: str) -> int:
    log({"event": "error", "message": message})
    return EXIT_BAD_CONFIG


def runs_inside(arm: Arm, sub: str, group: str, env_name: str) -> list[str]:
    """Runs borrowing a warm environment (their groups are tagged acagpu:env) and any app or job in
    its own group: such an environment is never removed."""
    flt = {"$filter": f"tagName eq '{TAG_ENV}' and tagValue eq '{env_name}'"}
    runs = {
        str((g.get("tags") or {}).get(TAG_RUN_ID))
        for g in arm.pages(f"/subscriptions/{sub}/resourcegroups", RESOURCES_API, flt)
        if (g.get("tags") or {}).get(TAG_RUN_ID)
        and (g.get("tags") or {}).get(TAG_KIND) != KIND_ENV
        and (g.get("properties") or {}).get("provisioningState") != "Deleting"
    }
    base = f"/subscriptions/{sub}/resourceGroups/{urllib.parse.quote(group)}/providers/Microsoft.App"
    runs |= {
        str((item.get("tags") or {}).get(TAG_RUN_ID) or "(unknown)")
        for kind in ("containerApps", "jobs")
        for item in arm.pages(f"{base}/{kind}", APP_API)
    }
    return sorted(runs)


def _busy(arm: Arm, sub: str, name: str, tags: dict[str, Any]) -> str | None:
    if tags.get(TAG_KIND) != KIND_ENV:
        return None
    runs = runs_inside(arm, sub, name, str(tags.get(TAG_ENV) or name.removeprefix("rg-acagpu-env-")))
    return f"warm environment with a run inside: {', '.join(runs)}" if runs else None


def _stop_billing(arm: Arm, sub: str, group: str, served: str | None = None) -> None:
    """Container apps and jobs first: once they are gone nothing in the group bills per second. A
    served app is scaled to 0 replicas before that (as acagpu's teardown), so it bills nothing from
    the update on even when its delete is slow or refused."""
    base = f"/subscriptions/{sub}/resourceGroups/{urllib.parse.quote(group)}/providers/Microsoft.App"
    if served:
        scale = {"properties": {"template": {"scale": {"minReplicas": 0, "maxReplicas": 0}}}}
        try:
            arm.call("PATCH", f"{base}/containerApps/{urllib.parse.quote(served)}", APP_API, body=scale)
        except ArmFailure as exc:  # the delete below is still the guarantee
            log({"event": "warning", "group": group, "message": f"could not scale {served} to zero: {exc}"})
    for kind in ("containerApps", "jobs"):
        try:
            items = arm.pages(f"{base}/{kind}", APP_API)
        except ArmFailure as exc:
            if "MissingSubscriptionRegistration" in str(exc):
                return  # Microsoft.App was never registered there: no app or job can exist
            raise
        for item in items:
            arm.call("DELETE", f"{base}/{kind}/{urllib.parse.quote(str(item['name']))}", APP_API)


def queue_run(arm: Arm, sub: str, group: str, tags: dict[str, Any], groups: list[dict[str, Any]]) -> Any:
    """(environment's group, account, run id, its job's own role assignments) of a queue run, read
    before its group goes: its Event job's acagpu:queue tag names the account, its group's acagpu:env
    the environment; a warm floor's role on its job is listed now (the job goes first). None: not one."""
    run_id, env_name = tags.get(TAG_RUN_ID), tags.get(TAG_ENV)
    if not run_id or not env_name or tags.get(TAG_KIND) == KIND_ENV:
        return None
    base = f"/subscriptions/{sub}/resourceGroups/{urllib.parse.quote(group)}/providers/Microsoft.App"
    for job in arm.pages(f"{base}/jobs", APP_API):
        text = str((job.get("tags") or {}).get(TAG_QUEUE) or "")
        account = dict(p.split("=", 1) for p in text.split(";") if "=" in p).get("account")
        if not account:
            continue
        scope = f"{base}/jobs/{urllib.parse.quote(str(job['name']))}"
        job_roles = [str(a["id"]) for a in _own_assignments(arm, scope, str(run_id))]
        for other in groups:
            other_tags = other.get("tags") or {}
            if other_tags.get(TAG_KIND) == KIND_ENV and other_tags.get(TAG_ENV) == env_name:
                return str(other["name"]), account, str(run_id), job_roles
    return None


def _own_assignments(arm: Arm, scope: str, run_id: str) -> list[dict[str, Any]]:
    """The role assignments made at `scope` itself whose description names the run (acagpu's)."""
    found = arm.pages(f"{scope}/providers/Microsoft.Authorization/roleAssignments", AUTH_API,
                      {"$filter": "atScope()"})  # fmt: skip
    mine = []
    for assignment in found:
        props = assignment.get("properties") or {}
        at = str(props.get("scope") or "").rstrip("/").lower()
        if at == scope.lower() and props.get("description") == f"{TAG_RUN_ID}={run_id}":
            mine.append(assignment)
    return mine


def drop_queue_run(
    arm: Arm, sub: str, env_group: str, account: str, run_id: str, job_roles: list[str]
) -> list[str]:
    """A queue run's role assignments (those whose description names it: on its job, read before the
    job went, and on each queue), then its three queues (each only when its metadata names the run),
    through ARM; what was left, each with why."""
    base = (
        f"/subscriptions/{sub}/resourceGroups/{urllib.parse.quote(env_group)}/providers/Microsoft.Storage/"
        f"storageAccounts/{urllib.parse.quote(account)}/queueServices/default/queues"
    )
    left = []
    for assignment_id in job_roles:
        try:
            arm.call("DELETE", assignment_id, AUTH_API)
        except ArmFailure as exc:
            left.append(f"the job's role assignment {assignment_id.rsplit('/', 1)[-1]}: {exc}")
    for name in (f"acagpu-{run_id}", f"acagpu-{run_id}-results", f"acagpu-{run_id}-poison"):
        scope = f"{base}/{name}"
        try:
            for assignment in _own_assignments(arm, scope, run_id):
                arm.call("DELETE", str(assignment["id"]), AUTH_API)
            queue = arm.call("GET", scope, STORAGE_API)
            if queue is None:
                continue  # gone already
            metadata = (queue.get("properties") or {}).get("metadata") or {}
            marks = {str(k).lower(): v for k, v in metadata.items()}
            if marks.get(QUEUE_OWNER) != run_id:
                left.append(f"{name}: its metadata does not name run {run_id} ({QUEUE_OWNER}): not acagpu's")
                continue
            arm.call("DELETE", scope, STORAGE_API)
        except ArmFailure as exc:
            left.append(f"{name}: {exc}")
    return left


def sweep(env: dict[str, str], now: datetime | None = None) -> int:
    sub = env.get("ACAGPU_SUBSCRIPTION", "").strip()
    if not sub:
        return _config_error("ACAGPU_SUBSCRIPTION is not set")
    dry_run = env.get("ACAGPU_GUARD_DRY_RUN", "").lower() == "true"
    older = env.get("ACAGPU_GUARD_OLDER_THAN_S", "").strip()
    older_than = timedelta(seconds=int(older)) if older.isdigit() and int(older) > 0 else None
    excludes = tuple(p.strip() for p in env.get("ACAGPU_GUARD_EXCLUDES", "").split(",") if p.strip())
    wait_s = float(env.get("ACAGPU_GUARD_WAIT_S", "1200") or 1200)
    auth_wait_s = float(env.get("ACAGPU_GUARD_AUTH_WAIT_S", "") or AUTH_WAIT_S)
    extra = [s.strip() for s in env.get("ACAGPU_GUARD_SUBSCRIPTIONS", "").split(",") if s.strip()]
    arm = Arm(env.get("ACAGPU_ARM_ENDPOINT") or ARM, identity_token(env))
    now = now or datetime.now(UTC)
    counts = {"deleted": 0, "would-delete": 0, "skipped": 0, "failed": 0}
    deleted: list[str] = []
    acted: list[dict[str, Any]] = []
    rules = (older_than, excludes, dry_run, wait_s)
    for subscription in dict.fromkeys([sub, *extra]):
        try:
            _wait_for_access(arm, subscription, auth_wait_s)
            _sweep_subscription(arm, subscription, now, rules, counts, deleted, acted)
        except ArmFailure as exc:  # one subscription out of reach must not stop the others
            counts["failed"] += 1
            log({"event": "error", "subscription": subscription, "message": str(exc)})
            acted.append({"subscription": subscription, "status": "failed", "error": str(exc)[:300]})
    log({"event": "summary", "dry_run": dry_run, "counts": counts, "deleted": deleted, "at": _iso(now)})
    own = env.get("ACAGPU_GUARD_GROUP", "").strip()
    if own:
        try:
            path = f"/subscriptions/{sub}/resourcegroups/{urllib.parse.quote(own)}"
            did = bool(counts["deleted"] or counts["failed"])
            failure = next((str(a["error"]) for a in acted if a.get("error")), "")
            record(arm, path, summary_text(now, counts, deleted, failure), did)
        except ArmFailure as exc:
            log({"event": "error", "message": f"could not record the summary on {own}: {exc}"})
    url = env.get("ACAGPU_NOTIFY", "").strip()
    if url and acted:
        nodes = frozenset(a.strip() for a in env.get("ACAGPU_GUARD_NODES", "").split(",") if a.strip())
        notify(url, notify_message(dry_run, counts, acted, _prices(env), nodes))
    return EXIT_INCOMPLETE if counts["failed"] else 0


Rules = tuple[timedelta | None, tuple[str, ...], bool, float]


def _wait_for_access(arm: Arm, sub: str, budget: float) -> None:
    """Until the identity may read the subscription's groups, for at most `budget` seconds: the
    first scheduled run can fire before the role assignment install made is effective (ARM answers
    403 AuthorizationFailed meanwhile). Anything else, or the budget spent, goes on to the sweep,
    which reports it."""
    ends, pause = time.monotonic() + budget, 1.0
    while True:
        try:
            arm.call("GET", f"/subscriptions/{sub}/resourcegroups", RESOURCES_API, {"$top": "1"})
            return
        except ArmFailure as exc:
            if exc.status != 403 or time.monotonic() + pause > ends:
                return
            log(
                {
                    "event": "waiting",
                    "subscription": sub,
                    "for": "the role assignment",
                    "message": str(exc)[:200],
                }
            )
            time.sleep(pause)
            pause = min(pause * 2, 30.0)


def _sweep_subscription(
    arm: Arm,
    sub: str,
    now: datetime,
    rules: Rules,
    counts: dict[str, int],
    deleted: list[str],
    acted: list[dict[str, Any]],
) -> None:
    older_than, excludes, dry_run, wait_s = rules
    flt = {"$filter": f"tagName eq '{TAG_MANAGED}' and tagValue eq 'true'"}
    groups = arm.pages(f"/subscriptions/{sub}/resourcegroups", RESOURCES_API, flt)
    accepted: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}  # deletes ARM accepted, by name
    for group in groups:
        name = str(group["name"])
        tags = group.get("tags") or {}
        action, reason = decide(name, tags, now, older_than, excludes, _state(group))
        event = {"event": "decision", "group": name, "run_id": tags.get(TAG_RUN_ID), "reason": reason}
        event["subscription"] = sub
        fact = {"subscription": sub, "resource_group": name, "run_id": tags.get(TAG_RUN_ID)}
        fact |= {"age_seconds": _age(tags, now), "gpu": tags.get("acagpu:gpu")}
        if tags.get(TAG_KIND) == KIND_ENV:
            event["kind"] = KIND_ENV
        if action == "delete":
            try:
                busy = _busy(arm, sub, name, tags)
            except ArmFailure as exc:
                busy = f"cannot list its runs: {exc}"
            if busy:
                action, event["reason"] = "skip", busy
        if action == "skip":
            counts["skipped"] += 1
            log(event | {"status": "skipped"})
            continue
        if tags.get(TAG_KIND) != KIND_ENV:  # a run: priced as acagpu prices it, before it goes
            try:
                fact["replica_seconds"] = round(
                    replica_seconds(arm, sub, name, _age(tags, now), now, tags), 1
                )
            except ArmFailure:
                fact["replica_seconds"] = None  # unknown, never a confident $0.00
        if dry_run:
            counts["would-delete"] += 1
            log(event | {"status": "would-delete"})
            acted.append(fact | {"status": "would-delete"})
            continue
        path = f"/subscriptions/{sub}/resourcegroups/{urllib.parse.quote(name)}"
        try:
            fresh = arm.call("GET", path, RESOURCES_API)  # the re-check right before the delete
            if fresh is None:
                counts["skipped"] += 1
                log(event | {"status": "skipped", "reason": "already gone"})
                continue
            again, why = decide(
                name, fresh.get("tags") or {}, datetime.now(UTC), older_than, excludes, _state(fresh)
            )
            busy = _busy(arm, sub, name, fresh.get("tags") or {}) if again == "delete" else None
            if again != "delete" or busy:
                counts["skipped"] += 1
                log(event | {"status": "skipped", "reason": f"re-checked before delete: {busy or why}"})
                continue
            queues = queue_run(arm, sub, name, fresh.get("tags") or {}, groups)  # before its job goes
            _stop_billing(arm, sub, name, (fresh.get("tags") or {}).get(TAG_SERVED))
            arm.call("DELETE", path, RESOURCES_API)
            left = drop_queue_run(arm, sub, *queues) if queues else []
            if left:  # the group goes; what is left of its queues is said, and the run counts failed
                raise ArmFailure(0, f"its queues were not all deleted: {'; '.join(left)}")
        except ArmFailure as exc:
            counts["failed"] += 1
            log(event | {"status": "failed", "error": str(exc)})
            acted.append(fact | {"status": "failed", "error": str(exc)[:300]})
            continue
        accepted[name.lower()] = (event, fact)
    # then wait for all of them at once: one listing per round, not a wait per group
    gone = _wait_all_gone(arm, sub, set(accepted), wait_s, flt)
    for key, (event, fact) in accepted.items():
        counts["deleted"] += 1
        deleted.append(str(event["group"]))
        log(event | {"status": "deleted", "verified": key in gone})
        acted.append(fact | {"status": "deleted"})


def _state(group: dict[str, Any]) -> str | None:
    """A resource group's provisioningState as ARM lists it (`Deleting` once its delete is accepted)."""
    props = group.get("properties")
    state = props.get("provisioningState") if isinstance(props, dict) else None
    return str(state) if state else None


def execution_seconds(start_time: Any, end_time: Any, now: datetime) -> float:
    """One execution's replica life so far from ARM's start and end times: acagpu's own rule
    (workflow/spend/so_far.execution_seconds; tests/unit/test_guard_rules.py keeps them equal)."""
    start = parse_iso_utc(str(start_time or ""))
    if start is None:
        return 0.0
    end = parse_iso_utc(str(end_time or "")) or now
    return max(0.0, (end - start).total_seconds())


TAG_SPENT = "acagpu:spent-gpu-seconds"
TAG_SPENT_AT = "acagpu:spent-at"


def recorded(tags: dict[str, str]) -> tuple[float, datetime] | None:
    """What a kept run's group records of its spend (acagpu's workflow/spend/record.recorded; kept
    equal by tests/unit/test_guard_rules.py): (GPU-seconds measured, when), else None."""
    lowered = {str(k).lower(): str(v) for k, v in tags.items()}
    at = parse_iso_utc(lowered.get(TAG_SPENT_AT, ""))
    try:
        seconds = float(lowered.get(TAG_SPENT, ""))
    except ValueError:
        return None
    return None if at is None or seconds < 0 else (seconds, at)


def replica_seconds(
    arm: Arm, sub: str, group: str, age: int | None, now: datetime, tags: dict[str, str] | None = None
) -> float:
    """What `acagpu status` counts for a group: what the group records of a kept run, then every job
    execution's life that began after that record, and the time since the record (else the group's
    age) for an app that is not stopped (an upper bound, as acagpu's); read before the apps go."""
    base = f"/subscriptions/{sub}/resourceGroups/{urllib.parse.quote(group)}/providers/Microsoft.App"
    kept = recorded(tags or {})
    since = kept[1] if kept else None
    span = float(age or 0)
    if since is not None:
        span = min(span, max(0.0, (now - since).total_seconds()))
    seconds = kept[0] if kept else 0.0
    for app in arm.pages(f"{base}/containerApps", APP_API):
        props = app.get("properties") or {}
        scale = (props.get("template") or {}).get("scale") or {}
        if str(props.get("runningStatus") or "").lower() != "stopped" and scale.get("maxReplicas"):
            seconds += span
    for job in arm.pages(f"{base}/jobs", APP_API):
        path = f"{base}/jobs/{urllib.parse.quote(str(job['name']))}/executions"
        for item in arm.pages(path, APP_API):
            props = item.get("properties") or {}
            start = parse_iso_utc(str(props.get("startTime") or ""))
            if since is None or start is None or start > since:  # as acagpu's so_far._after
                seconds += execution_seconds(props.get("startTime"), props.get("endTime"), now)
    return seconds


def _age(tags: dict[str, str], now: datetime) -> int | None:
    created = parse_iso_utc(tags.get(TAG_CREATED_AT, ""))
    return None if created is None else max(0, round((now - created).total_seconds()))


def _prices(env: dict[str, str]) -> dict[str, float]:
    try:
        table = json.loads(env.get("ACAGPU_GUARD_PRICES") or "{}")
    except ValueError:
        return {}
    return {str(k): float(v) for k, v in table.items() if isinstance(v, int | float)}


# ---- the message to a Slack or Teams incoming webhook (acagpu's --notify shape) ----------------


def usd_text(usd: float) -> str:
    """acagpu's one money text (aca_gpu/units.usd_text): cents from a cent up, four decimals below,
    `<$0.0001` for an amount above zero that four decimals would print as `$0.0000`."""
    if 0 < abs(usd) < 0.00005:
        return "<$0.0001" if usd > 0 else "-<$0.0001"
    return f"${usd:.4f}" if usd != 0 and abs(usd) < 0.01 else f"${usd:.2f}"


def notify_message(
    dry_run: bool,
    counts: dict[str, int],
    acted: list[dict[str, Any]],
    prices: dict[str, float],
    nodes: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """`text` for the chat, the facts under `acagpu`; names, ages and dollars only, no secret."""
    items = []
    lines = []
    for fact in acted:
        age = fact.get("age_seconds")
        gpu = (fact.get("gpu") or "").split(",")[0]
        # acagpu's one spend figure: replica lifetimes; a dedicated node bills its whole age
        billed = age if gpu in nodes else fact.get("replica_seconds")
        priced = gpu in prices and isinstance(billed, int | float)
        usd = round(prices[gpu] * billed / 3600, 4) if priced else None
        items.append(fact | {"spend_usd_estimate": usd})
        when = f"{age / 3600:.1f}h old" if isinstance(age, int) else "age unknown"
        money = f", ≈{usd_text(usd)}" if usd is not None else ""
        error = f" — {fact['error']}" if fact.get("error") else ""
        lines.append(
            f"• {fact['status']} `{fact.get('resource_group', fact['subscription'])}` ({when}{money}){error}"
        )
    verb = "would delete" if dry_run else "deleted"
    done = counts["would-delete"] if dry_run else counts["deleted"]
    head = f"*acagpu guard: {verb} {done}, failed {counts['failed']}*"
    facts = {
        "schema": 1,
        "kind": "reap",
        "source": "guard",
        "outcome": "failed" if counts["failed"] else "ok",
        "dry_run": dry_run,
        "counts": counts,
        "items": items,
    }
    return {"text": "\n".join([head, *lines[:40]]), "acagpu": facts}


def notify(url: str, message: dict[str, Any]) -> None:
    """POST the message; a failure is logged, never fatal (the sweep already happened)."""
    request = urllib.request.Request(
        url, data=json.dumps(message).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    host = urllib.parse.urlsplit(url).hostname
    try:
        with urllib.request.urlopen(request, timeout=NOTIFY_TIMEOUT_S) as resp:
            log({"event": "notified", "host": host, "status": resp.status})
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log({"event": "error", "message": f"could not notify {host}: {getattr(exc, 'reason', exc)}"})


def summary_text(now: datetime, counts: dict[str, int], deleted: list[str], failure: str = "") -> str:
    """One tag value: when, what was deleted (by name while it fits), the counts, and the first
    failure's text (what `acagpu guard status` shows as a failed run's reason)."""
    tail = f"; would-delete {counts['would-delete']}; skipped {counts['skipped']}; failed {counts['failed']}"
    if failure:
        tail += f" ({' '.join(failure.split())[:120]})"
    head = f"{_iso(now)} deleted {counts['deleted']}"
    names = ",".join(deleted)
    room = TAG_VALUE_MAX - len(head) - len(tail) - 2
    if names and len(names) > room:
        names = names[: max(0, room - 1)] + "…"
    return f"{head}{': ' + names if names else ''}{tail}"[:TAG_VALUE_MAX]


def record(arm: Arm, path: str, text: str, acted: bool) -> None:
    """Write the summary to the guard's own group, only if that group is tagged as the guard's."""
    group = arm.call("GET", path, RESOURCES_API)
    if not group or (group.get("tags") or {}).get(TAG_ROLE) != "guard":
        raise ArmFailure(0, "it is not tagged acagpu:role=guard")
    tags = dict(group.get("tags") or {})
    tags[TAG_LAST_RUN] = text
    if acted:
        tags[TAG_LAST_DELETION] = text
    arm.call("PATCH", path, RESOURCES_API, body={"tags": tags})


def _wait_all_gone(arm: Arm, sub: str, names: set[str], wait_s: float, flt: dict[str, str]) -> set[str]:
    """The names (lowercase) no longer listed, waiting up to wait_s for all of them."""
    end = time.monotonic() + wait_s
    gone: set[str] = set()
    while names - gone:
        try:
            listed = arm.pages(f"/subscriptions/{sub}/resourcegroups", RESOURCES_API, flt)
            gone = names - {str(g["name"]).lower() for g in listed}
        except ArmFailure:
            pass  # one failed read says nothing about the groups: keep waiting
        if not names - gone or time.monotonic() >= end:
            break
        time.sleep(2.0 if wait_s > 60 else 0.5)
    return gone


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main() -> int:
    try:
        return sweep(dict(os.environ))
    except ArmFailure as exc:
        log({"event": "error", "message": str(exc)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
