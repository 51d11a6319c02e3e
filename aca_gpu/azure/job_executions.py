"""A job's executions: started, read and listed; and raw REST through the authenticated pipeline.

Job start (whose answer may be 200 `{id,name}` or 202 + Location) goes through `send_request`
(`send`), which the preview-only calls (preview.py) and marked starts (shards.py) use too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from aca_gpu.azure import api_versions
from aca_gpu.azure.app_bodies import execution_template
from aca_gpu.azure.app_records import execution_info
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.translate import arm_error_fields, make_error, retrying, translate_errors
from aca_gpu.errors import CloudError, InfraError, WaitTimedOut, is_throttled
from aca_gpu.models import ContainerDef, ExecutionInfo

JOB_START_TIMEOUT_S = 300.0
START_ATTEMPTS = 3
THROTTLED_PATIENCE_S = 600.0  # a start refused for ARM's rate is sent again this long, never counted


def _q(value: str) -> str:
    return quote(value, safe="")


def app_path(clients: Clients, rg: str) -> str:
    return f"/subscriptions/{_q(clients.subscription_id)}/resourceGroups/{_q(rg)}/providers/Microsoft.App"


def get_execution(clients: Clients, rg: str, job: str, execution: str) -> ExecutionInfo:
    return retrying(
        "read job execution",
        f"{job}/{execution}",
        lambda: execution_info(clients.apps.job_execution(rg, job, execution)),
    )


def list_executions(clients: Clients, rg: str, job: str) -> list[ExecutionInfo]:
    """Newest first (by start time), so [0] is the latest execution."""
    items = retrying(
        "list executions of",
        job,
        lambda: [execution_info(e) for e in clients.apps.jobs_executions.list(rg, job)],
    )
    return sorted(items, key=lambda e: e.start_time or "", reverse=True)


def send(
    clients: Clients,
    method: str,
    url: str,
    action: str,
    target: str,
    *,
    json_body: Any = None,
    once: bool = False,
) -> tuple[int, Any, Mapping[str, str]]:
    """(status, parsed JSON body or None, headers); ARM errors raised as aca_gpu errors.

    `once`: a request that is not safe to repeat (Jobs_Start): azure-core's RetryPolicy resends a
    POST after 500/503/504 (and any answer with Retry-After), although ARM may have done the work;
    with no status retries the caller hears the first failure and decides (it never resends a
    POST after a lost connection either)."""
    from azure.core.rest import HttpRequest

    request = HttpRequest(method, url) if json_body is None else HttpRequest(method, url, json=json_body)
    options: dict[str, Any] = {"retry_status": 0} if once else {}
    with translate_errors(action, target):
        response = clients.apps.send_request(request, **options)
        text = response.text() if callable(getattr(response, "text", None)) else str(response.text)
    status = int(response.status_code)
    if status >= 400:
        code, message = arm_error_fields(text)
        raise make_error(action, target, code, status, message)
    body: Any = None
    if text and text.strip():
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return status, body, response.headers


def _execution_name(body: Any) -> str | None:
    if isinstance(body, dict):
        name = body.get("name")
        if name:
            return str(name)
        ident = body.get("id")
        if ident:
            return str(ident).rstrip("/").rsplit("/", 1)[-1]
    return None


def start_job(
    clients: Clients,
    rg: str,
    job: str,
    *,
    template: Sequence[ContainerDef] | None = None,
    timeout: float = JOB_START_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Start a manual job; the execution name comes from the 200 body or from the 202's Location poll.

    With `template`, this execution runs those containers (image, command, env) instead of the job's
    own: one job, a different workload per start, no PUT (Jobs_Start's JobExecutionTemplate).

    The POST is sent again only when it provably started nothing (azure-core never resends it:
    `send(once=True)`): after a failure the executions are listed again, and a new one means the
    start did happen (no second GPU bill). A 429 is ARM refusing the rate: sent again after its
    Retry-After (the rate gate holds it) without using up a try, for as long as a fan-out's start.
    """
    version = api_versions.working(api_versions.STABLE)
    url = f"{app_path(clients, rg)}/jobs/{_q(job)}/start?api-version={version}"
    before = {e.name for e in list_executions(clients, rg, job)}
    attempt, patience_ends = 0, clock() + THROTTLED_PATIENCE_S
    while attempt < START_ATTEMPTS:
        attempt += 1
        try:
            body_out = execution_template(template) if template else None
            status, body, headers = send(
                clients, "POST", url, "start job", job, json_body=body_out, once=True
            )
            break
        except InfraError as exc:
            if is_throttled(exc) and clock() < patience_ends:
                attempt -= 1
                sleep(max(0.05, clients.settings.polling_interval))
                continue
            started = [e.name for e in list_executions(clients, rg, job) if e.name not in before]
            if started:
                return started[0]
            if attempt == START_ATTEMPTS:
                raise
            sleep(max(0.05, clients.settings.polling_interval) * attempt)
    name = _execution_name(body)
    if name:
        return name
    location = headers.get("Location") or headers.get("location") or headers.get("Azure-AsyncOperation")
    deadline = clock() + timeout
    interval = max(0.05, clients.settings.polling_interval)
    while status == 202 and location:
        if clock() >= deadline:
            raise WaitTimedOut(f"job {job} start not confirmed after {timeout:.0f}s", code="JobStartTimeout")
        sleep(_retry_after(headers, interval))
        status, body, headers = send(clients, "GET", location, "start job", job)
        name = _execution_name(body) or _execution_name((body or {}).get("properties") if body else None)
        if name:
            return name
        location = headers.get("Location") or headers.get("location") or location
    # the answer carried no name: the newest execution that was not there before is ours
    fresh = [e.name for e in list_executions(clients, rg, job) if e.name not in before]
    if fresh:
        return fresh[0]
    raise CloudError(f"job {job} started but no execution name came back", code="NoExecutionName")


def _retry_after(headers: Mapping[str, str], default: float) -> float:
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(default, float(value)) if value else default
    except ValueError:
        return default
