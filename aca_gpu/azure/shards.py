"""The calls a fan-out needs beyond one execution: a start matched by its own token, a stop, the
environment's usages.

A fan-out starts many executions of one job at once, so "the new execution is the one that was not
listed before the start" (how `job_executions.start_job` recovers from a lost answer) is ambiguous once
starts overlap. Every fan-out execution carries a token in its template env instead; the execution
is read back by that token (`ExecutionInfo.env`), never by listing before and after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from aca_gpu.azure import api_versions
from aca_gpu.azure.app_bodies import execution_template
from aca_gpu.azure.app_records import execution_info
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.job_executions import THROTTLED_PATIENCE_S, _q, app_path, list_executions, send
from aca_gpu.azure.resources import as_json, usage_infos
from aca_gpu.azure.translate import retrying, translate_errors
from aca_gpu.errors import AcaGpuError, CloudError, InfraError, WaitTimedOut, is_throttled
from aca_gpu.models import ContainerDef, ExecutionInfo, MarkedStart, ShareDownload, UsageInfo

START_ATTEMPTS = 4
LOOK_AFTER_S = 0.5  # a start without an answer: ARM's listing is given this long (x the try) to show it


def marked_all(clients: Clients, rg: str, job: str, key: str, token: str) -> list[ExecutionInfo]:
    """Every execution whose template env says `key=token`, newest first: every page is read (the
    pager follows nextLink), since an older copy of the same start lists after the newer one."""
    return [info for info in list_executions(clients, rg, job) if info.env.get(key) == token]


def find_marked(clients: Clients, rg: str, job: str, key: str, token: str) -> ExecutionInfo | None:
    """The oldest execution whose template env says `key=token` (every page read), if any."""
    found = marked_all(clients, rg, job, key, token)
    return found[-1] if found else None


def executions_marked(
    clients: Clients, rg: str, job: str, key: str, tokens: Collection[str], *, every: bool = False
) -> list[ExecutionInfo]:
    """The job's executions, page by page (the SDK's pager follows `nextLink`), until the page on
    which every one carrying a token of `tokens` was seen: the service lists the newest first, so a
    fan-out's live attempts are on the first page or two and a listing costs one or two reads, not
    N/100. Every execution of a page read is kept (a copy of a start, made a moment before the one
    its answer named, lists right after it). With `every`, every page: a start that went unanswered
    may have an older copy further down."""
    wanted = set(tokens)
    found: list[ExecutionInfo] = []
    with translate_errors("list executions of", job):
        for page in clients.apps.jobs_executions.list(rg, job).by_page():
            for item in page:
                info = execution_info(item)
                found.append(info)
                wanted.discard(info.env.get(key, ""))
            if not wanted and not every:
                break
    return found


def start_marked(
    clients: Clients,
    rg: str,
    job: str,
    template: Sequence[ContainerDef] | None,
    *,
    key: str,
    token: str,
    sleep: Callable[[float], None] = time.sleep,
    throttled_wait_s: float = 2.0,
    cancel: threading.Event | None = None,
) -> MarkedStart:
    """Start one execution of `template` (whose env carries `key=token`; None: the job's own
    template, which carries it) and return it.

    Jobs_Start is not idempotent: a POST that ARM accepted but whose answer was a 5xx, a reset or a
    cut body may have started the execution. So azure-core never sends it again itself (`once`);
    the execution is looked for by its token (every page of the listing) and the POST is sent again
    only when none carries it. Should a start still have run twice (the look came before ARM's
    listing showed the first), every other execution carrying the token is stopped and named in
    `extras`. A 429 is ARM refusing the rate, not the start: sent again (after its Retry-After,
    held by the subscription's rate gate) without using up a try. `cancel` (Ctrl-C) ends the
    waiting between tries: WaitTimedOut("Cancelled")."""
    version = api_versions.working(api_versions.STABLE)
    url = f"{app_path(clients, rg)}/jobs/{_q(job)}/start?api-version={version}"
    body_out = execution_template(template) if template else None
    attempt, patience_ends, unsure = 1, time.monotonic() + THROTTLED_PATIENCE_S, False
    last: AcaGpuError | None = None
    while True:
        if cancel is not None and cancel.is_set():
            raise WaitTimedOut(f"start job {job}: cancelled", code="Cancelled")
        try:
            _, body, _ = send(clients, "POST", url, "start job", job, json_body=body_out, once=True)
            name = _name(body)
            if name:
                return _checked(clients, rg, job, key, token, name) if unsure else MarkedStart(name)
        except AcaGpuError as exc:
            if is_throttled(exc) and time.monotonic() < patience_ends:
                _pause(sleep, throttled_wait_s, cancel)
                continue
            if not isinstance(exc, InfraError):
                raise
            last = exc
        unsure = True  # the POST may have started it: look before sending again
        _pause(sleep, LOOK_AFTER_S * attempt, cancel)
        found = find_marked(clients, rg, job, key, token)
        if found is not None:
            return _checked(clients, rg, job, key, token, found.name)
        if attempt >= START_ATTEMPTS:
            if last is not None:
                raise last
            raise InfraError(
                f"job {job} start not confirmed: no execution carries its token", code="NoExecution"
            )
        attempt += 1


def _pause(sleep: Callable[[float], None], seconds: float, cancel: threading.Event | None) -> None:
    if cancel is None:
        sleep(seconds)
    elif cancel.wait(seconds):
        raise WaitTimedOut("start job: cancelled", code="Cancelled")


def _checked(clients: Clients, rg: str, job: str, key: str, token: str, name: str) -> MarkedStart:
    """`name`, after a start that was sent more than once or not answered: any other execution that
    carries the token is the same start run again, and is stopped (never billed twice)."""
    extras = tuple(info.name for info in marked_all(clients, rg, job, key, token) if info.name != name)
    for extra in extras:
        stop_execution(clients, rg, job, extra)
    return MarkedStart(name, extras, unanswered=True)


def _name(body: Any) -> str | None:
    if isinstance(body, Mapping):
        if body.get("name"):
            return str(body["name"])
        if body.get("id"):
            return str(body["id"]).rstrip("/").rsplit("/", 1)[-1]
    return None


def stop_execution(clients: Clients, rg: str, job: str, execution: str) -> None:
    """Stop one execution (its replica stops billing); stopping an ended one is harmless."""
    retrying(
        "stop job execution",
        f"{job}/{execution}",
        lambda: clients.apps.jobs.begin_stop_execution(rg, job, execution).result(),
    )


def environment_usages(clients: Clients, rg: str, environment: str) -> list[UsageInfo]:
    """The environment's own usages (GPU quota is per environment since 2026-09: Microsoft Learn,
    "Quotas for Azure Container Apps")."""
    items = retrying(
        "list usages of environment",
        environment,
        lambda: [as_json(i) for i in clients.apps.managed_environment_usages.list(rg, environment)],
    )
    return usage_infos(items)


# ---- the results share (Azure Files data plane) ---------------------------------------------------


def account_key(clients: Clients, rg: str, account: str) -> str:
    """The account's first key, from listKeys (held in memory by the caller only)."""
    listed = retrying(
        "list storage account keys", account, lambda: clients.storage.storage_accounts.list_keys(rg, account)
    )
    keys = [k for k in (as_json(listed).get("keys") or []) if k.get("value")]
    if not keys:
        raise CloudError(f"storage account {account} answered no key", code="StorageAccountKeyMissing")
    return str(keys[0]["value"])


def _share_access(clients: Clients, rg: str, account: str) -> tuple[str, str | None]:
    """The account's first key (held in memory for the call only) and its file endpoint."""
    key = account_key(clients, rg, account)
    props = as_json(
        retrying(
            "read storage account",
            account,
            lambda: clients.storage.storage_accounts.get_properties(rg, account),
        )
    )
    endpoints = (props.get("properties") or props).get("primaryEndpoints") or {}
    file_endpoint = endpoints.get("file") if isinstance(endpoints, Mapping) else None
    return key, str(file_endpoint) if file_endpoint else None


def make_folders(clients: Clients, rg: str, account: str, share: str, folders: Sequence[str]) -> None:
    """Each folder (parents first) on the share, made unless it exists: where a shard writes."""
    from azure.core.exceptions import AzureError, ResourceExistsError

    from aca_gpu.azure.fileshare import share_client

    key, endpoint = _share_access(clients, rg, account)
    client = share_client(account, key, share, endpoint=endpoint, verify=clients.verify)
    wanted: list[str] = []
    for folder in folders:
        parts = [p for p in folder.strip("/").split("/") if p]
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            if path not in wanted:
                wanted.append(path)
    with client:
        for path in wanted:
            try:
                client.create_directory(path)
            except ResourceExistsError:
                continue
            except AzureError as exc:
                raise InfraError(f"share {share}: folder {path} could not be made: {exc}") from None


def download(
    clients: Clients,
    rg: str,
    account: str,
    share: str,
    folders: Mapping[str, Path],
    on_retry: Callable[[str], None] | None = None,
) -> ShareDownload:
    """Each share folder's files into its local folder (the key is read once for all of them); a
    folder or file that did not arrive is named and the others still come."""
    from aca_gpu.azure.fileshare import download_tree

    key, endpoint = _share_access(clients, rg, account)
    written: list[Path] = []
    missed: list[tuple[str, str]] = []
    retries = 0
    for prefix, dest in folders.items():
        got = download_tree(
            account, key, share, prefix, dest, endpoint=endpoint, verify=clients.verify, on_retry=on_retry
        )
        written += got.written
        missed += got.missed
        retries += got.retries
    return ShareDownload(tuple(written), tuple(missed), retries)
