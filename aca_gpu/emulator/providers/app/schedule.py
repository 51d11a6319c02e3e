"""Schedule-triggered jobs: an execution starts at each emulated minute the job's cron matches.

The schedule runs on the emulator's clock (`Clock.emulated_utc`, scaled like every other duration),
so `*/15 * * * *` fires every 18 wall seconds at the default time scale. A minute is looked at once;
when a tick spans several matching minutes one execution starts, and none starts while the job's
previous scheduled execution still runs (whether ACA queues or overlaps them is UNCONFIRMED).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from aca_gpu.emulator import cron
from aca_gpu.emulator.context import Ctx
from aca_gpu.emulator.providers.app import models

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)


def fire_due(ctx: Ctx) -> list[str]:
    """Start the executions that are due; the names of those started."""
    now = ctx.clock.emulated_utc().replace(second=0, microsecond=0)
    started: list[str] = []
    for job in list(ctx.state.jobs.values()):
        config = job.configuration
        if (
            job.deleting
            or config.get("triggerType") != "Schedule"
            or models.job_state(ctx, job) != "Succeeded"
        ):
            continue
        if job.schedule_mark is None:
            job.schedule_mark = now  # counting starts once the job exists
            continue
        try:
            expression = cron.parse(str((config.get("scheduleTriggerConfig") or {}).get("cronExpression")))
        except cron.CronError:
            continue
        minute, due = job.schedule_mark + MINUTE, False
        while minute <= now:
            due = due or expression.matches(minute)
            minute += MINUTE
        job.schedule_mark = now
        busy = any(e.status == "Running" and e.trigger == "Schedule" for e in job.executions.values())
        if due and not busy:
            try:
                started.append(models.start_job(ctx, job, None, trigger="Schedule").name)
            except Exception:  # a broken template must not stop the ticker
                log.exception("scheduled start of %s", job.name)
    return started
