"""The queue worker's container: the user's image and command, with acagpu's worker in front.

The worker (templates/queue-worker/acagpu_queue_worker.py, standard library only) is injected the
way the zero-build tester and the guard are: its source travels compressed in an environment
variable and a `/bin/sh` line runs it with the image's `python3` (else `python`), the user's
command after it as its arguments. So the image must have `/bin/sh` and a Python 3 on its PATH; an
image without them ends at once with one line saying so, and every item stays on the queue.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from aca_gpu.errors import BadInput
from aca_gpu.models import ContainerDef, EventTrigger, JobSpec
from aca_gpu.naming import TAG_QUEUE
from aca_gpu.resources import template_path
from aca_gpu.tester import MAX_ENV_VALUE, bootstrap_line, encode_source, launch_line
from aca_gpu.workflow.queue.spec import QUEUE_LENGTH, QueueSpec, queue_tag

SRC_ENV = "ACAGPU_QUEUE_WORKER_SRC"
LAUNCH_NAME = "acagpu-worker"
LAUNCH = launch_line(
    bootstrap_line(SRC_ENV, "acagpu_queue_worker.py"),
    "acagpu-worker: this image has neither python3 nor python on its PATH (queue mode needs one)",
)


def script_path() -> Path:
    return template_path("queue-worker", "acagpu_queue_worker.py")


def worker_env(queue: QueueSpec, endpoint: str, floor: tuple[str, str, int] | None = None) -> dict[str, str]:
    """`floor` (a warm floor's): (the job's ARM id, the ARM endpoint, its replicaTimeout): the worker
    whose idle window ends sets the job's minExecutions back to 0 through ARM."""
    job_id, arm, timeout = floor or ("", "", 0)
    return {
        SRC_ENV: encode_source(script_path().read_bytes()),
        "ACAGPU_QUEUE_ENDPOINT": endpoint,
        "ACAGPU_QUEUE": queue.work_queue,
        "ACAGPU_RESULTS_QUEUE": queue.results_queue,
        "ACAGPU_POISON_QUEUE": queue.poison_queue,
        "ACAGPU_MAX_DELIVERIES": str(queue.max_deliveries),
        "ACAGPU_VISIBILITY_S": str(queue.visibility_s),
        "ACAGPU_RUN_ID": queue.run_id,
        # a warm floor's worker waits this long for an item before it exits (0: at once)
        "ACAGPU_IDLE_S": str(queue.warm_idle_s if queue.warm else 0),
        **(
            {"ACAGPU_FLOOR_JOB": job_id, "ACAGPU_ARM_ENDPOINT": arm, "ACAGPU_REPLICA_TIMEOUT_S": str(timeout)}
            if floor
            else {}
        ),
    }


def worker_container(
    container: ContainerDef, queue: QueueSpec, endpoint: str, floor: tuple[str, str, int] | None = None
) -> ContainerDef:
    """The run's container with the worker launched first and the user's command as its args."""
    env = {**container.env, **worker_env(queue, endpoint, floor)}
    for name, value in env.items():
        if len(value.encode("utf-8")) > MAX_ENV_VALUE:
            raise BadInput(
                f"{name} would be {len(value)} bytes, over the {MAX_ENV_VALUE}-byte limit kept for ACA"
            )
    return replace(
        container,
        command=("/bin/sh", "-c", LAUNCH, LAUNCH_NAME),
        args=tuple(container.args),
        env=env,
    )


def event_job(
    job: JobSpec, queue: QueueSpec, account: str, endpoint: str, floor_via: tuple[str, str] | None = None
) -> JobSpec:
    """The run's job made an Event job: the worker container and KEDA's azure-queue rule. With a warm
    floor and `floor_via` (the subscription, the ARM endpoint), its workers can drop the floor
    themselves (worker_env)."""
    trigger = EventTrigger(
        account=account,
        queue=queue.work_queue,
        queue_length=QUEUE_LENGTH,
        min_executions=queue.warm,
        max_executions=queue.workers,
        polling_interval_s=queue.polling_s,
    )
    tags = {**job.tags, TAG_QUEUE: f"{queue_tag(queue, account)};timeout={job.replica_timeout_s}"}
    floor = None
    if queue.warm and floor_via is not None:
        subscription, arm = floor_via
        group = f"/subscriptions/{subscription}/resourceGroups/{job.resource_group}"
        job_id = f"{group}/providers/Microsoft.App/jobs/{job.name}"
        floor = (job_id, arm, job.replica_timeout_s)
    container = worker_container(job.container, queue, endpoint, floor)
    return replace(job, container=container, event=trigger, tags=tags)
