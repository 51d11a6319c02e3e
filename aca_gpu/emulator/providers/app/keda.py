"""Event-triggered jobs: the KEDA `azure-queue` scaler as Container Apps runs it for a job.

Every `pollingInterval` (emulated seconds, default 30 as ACA documents) the scaler reads the
queue's approximate message count (Azurite's answer, invisible messages counted, as KEDA's default
`queueLengthStrategy` does) and starts

    wanted = ceil(messages / queueLength) - running executions, at most maxExecutions - running,

and at least `minExecutions - running` (the warm floor). Only the `azure-queue` rule type is
modelled; a rule of another type starts nothing. The first poll comes one interval after the job
exists (UNCONFIRMED: whether ACA polls at once).

Three platform behaviours reported against ACA are faults here (docs/emulator.md): `event_cap`
holds the running executions at `limit` (#1216), `empty_poll` starts one execution at a poll of an
emptied queue (#1125), `idle_replica` starts an execution whose container takes no message (#1656).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.app import models

log = logging.getLogger(__name__)
DEFAULT_POLLING_S = 30.0
DEFAULT_QUEUE_LENGTH = 5  # KEDA's azure-queue default
DEFAULT_EVENT_CAP = 10  # the `event_cap` fault: #1216 saw 10-12 executions at once
# what an `idle_replica` execution runs instead of its worker: it takes no message and stays until its
# replicaTimeout or its job's delete ends it
IDLE = ["/bin/sh", "-c", "exec sleep 2147483647"]


def _scale(job: Any) -> dict[str, Any]:
    config = job.configuration
    return dict((config.get("eventTriggerConfig") or {}).get("scale") or {})


def _queue_rule(scale: dict[str, Any]) -> dict[str, Any] | None:
    for rule in scale.get("rules") or []:
        if isinstance(rule, dict) and str(rule.get("type", "")).lower() == "azure-queue":
            return rule
    return None


def wanted(messages: int, queue_length: int, running: int, *, least: int, most: int) -> int:
    """How many executions one poll starts (pure: the rule above)."""
    by_queue = math.ceil(messages / max(1, queue_length)) - running
    start = min(by_queue, most - running)
    return max(start, least - running, 0)


async def poll(ctx: Ctx) -> list[str]:
    """One tick: the jobs whose interval has passed read their queue and start what KEDA would."""
    if ctx.queues is None:
        return []
    started: list[str] = []
    now = ctx.clock.now()
    for job in list(ctx.state.jobs.values()):
        if job.deleting or job.configuration.get("triggerType") != "Event":
            continue
        if models.job_state(ctx, job) != "Succeeded":
            continue
        scale = _scale(job)
        rule = _queue_rule(scale)
        if rule is None:
            continue
        interval = float(scale.get("pollingInterval") or DEFAULT_POLLING_S)
        if job.poll_at is None:
            job.poll_at = ctx.clock.after_seconds(interval)
            continue
        if now < job.poll_at:
            continue
        job.poll_at = ctx.clock.after_seconds(interval)
        metadata = rule.get("metadata") or {}
        messages = await ctx.queues.queue_length(str(metadata.get("queueName") or ""))
        if messages is None:
            continue  # an unreadable queue starts nothing (KEDA logs the scaler error)
        running = sum(1 for e in job.executions.values() if e.status == "Running")
        most = int(scale.get("maxExecutions") or 100)
        cap = ctx.faults.standing("event_cap", path=job.name)
        if cap is not None:  # #1216: stuck at 10-12 whatever the maximum
            most = min(most, int(cap.param("limit", str(DEFAULT_EVENT_CAP))))
        count = wanted(
            messages,
            int(metadata.get("queueLength") or DEFAULT_QUEUE_LENGTH),
            running,
            least=int(scale.get("minExecutions") or 0),
            most=most,
        )
        job.queue_seen = job.queue_seen or messages > 0
        emptied = messages == 0 and count == 0 and job.queue_seen and running < most
        if emptied and ctx.faults.fire("empty_poll", path=job.name) is not None:
            count = 1  # #1125: an emptied queue starts an execution every poll
        for _ in range(count):
            try:
                started.append(_start(ctx, job))
            except Exception:  # a broken template must not stop the ticker
                log.exception("event start of %s", job.name)
                break
    return started


def _start(ctx: Ctx, job: Any) -> str:
    """One execution as KEDA starts it; under `idle_replica` (#1656) its container takes no message."""
    override = None
    if ctx.faults.fire("idle_replica", path=job.name) is not None:
        containers = [dict(c) for c in job.template.get("containers") or []]
        for container in containers:
            container["command"], container["args"] = list(IDLE), []
        override = {"containers": containers}
        log.info("idle_replica: an execution of %s that takes no message", job.name)
    return models.start_job(ctx, job, override, trigger="Event").name
