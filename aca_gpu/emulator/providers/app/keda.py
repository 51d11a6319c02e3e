"""Event-triggered jobs: the KEDA `azure-queue` scaler as Container Apps runs it for a job.

Every `pollingInterval` (emulated seconds, default 30 as ACA documents) the scaler reads the
queue's approximate message count (Azurite's answer, invisible messages counted, as KEDA's default
`queueLengthStrategy` does) and starts

    wanted = ceil(messages / queueLength) - running executions, at most maxExecutions - running,

and at least `minExecutions - running` (the warm floor). Only the `azure-queue` rule type is
modelled; a rule of another type starts nothing. The first poll comes one interval after the job
exists (UNCONFIRMED: whether ACA polls at once). Faults are not modelled here yet.
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
        count = wanted(
            messages,
            int(metadata.get("queueLength") or DEFAULT_QUEUE_LENGTH),
            running,
            least=int(scale.get("minExecutions") or 0),
            most=int(scale.get("maxExecutions") or 100),
        )
        for _ in range(count):
            try:
                started.append(models.start_job(ctx, job, None, trigger="Event").name)
            except Exception:  # a broken template must not stop the ticker
                log.exception("event start of %s", job.name)
                break
    return started
