"""The explorer: wait for it to start (or for the runtime's refusal), then nvidia-smi through exec.

Used by the engine's probe, `acagpu smi` and `acagpu exec`. The exec websocket can drop
mid-command (the session then ends without the exit marker): nvidia-smi is retried, and a session
that never completes is an infrastructure error that says so, never a GPU verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from aca_gpu.errors import AcaGpuError, CloudError, ContainerRefused, InfraError, NotFound
from aca_gpu.gpu import nvidia_smi
from aca_gpu.gpu.nvidia_smi import NvidiaSmi
from aca_gpu.gpu.nvidia_smi_health import HealthReport, assess
from aca_gpu.models import Cloud, ExecResult, ReplicaInfo
from aca_gpu.output import NullProgress, Progress
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Run, Waiter
from aca_gpu.workflow.engine.outcome import ProbeResult
from aca_gpu.workflow.engine.replicas import replica_details, safe_events

EXEC_ATTEMPTS = 3
EXEC_TIMEOUT_S = 180.0
WAKE_TIMEOUT_S = 15 * 60.0
RUNNING = "Running"
STOPPED = "Stopped"
WAKE_STEP = "wake explorer"
# how often a replica awaited is looked for, whatever the polling interval: it bills from its start,
# and the look that sees it running is where acagpu's figure of it begins (a 5 s interval recorded
# a 3.7 s wake as 0.1 s)
LOOK_S = 1.0
# Text that means a replica will never start, so waiting out the deadline would only cost money.
FATAL_START_MARKERS = (
    "requirement error",
    "unsatisfied condition",
    "ContainerCreateFailure",
    "ErrImagePull",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "BackoffLimitExceeded",
)


def fatal_text(texts: Sequence[str]) -> str | None:
    """The most telling fatal line: the runtime's own error beats a generic back-off state."""
    for marker in FATAL_START_MARKERS:
        for text in texts:
            for line in text.splitlines():
                if marker.lower() in line.lower():
                    return line.strip()
    return None


def _running(replica: ReplicaInfo) -> bool:
    return replica.running_state == RUNNING and all(
        c.running_state in (None, RUNNING) for c in replica.containers
    )


def wait_started(
    cloud: Cloud,
    resource_group: str,
    app: str,
    waiter: Waiter,
    *,
    timeout: float,
    seen_at: list[float] | None = None,
) -> ReplicaInfo:
    """A running replica of `app`, or ContainerRefused as soon as the platform says it never will be.

    A refusal (CUDA requirement newer than the driver, image pull failure) is reported within one
    poll of the platform saying so, with the runtime's own text, instead of waiting out `timeout`.
    `seen_at` receives when the poll that found it running was sent (its bill began before that,
    by at most LOOK_S: it is looked for at least that often, as a job's replica is).
    """
    last: list[ReplicaInfo] = []

    def probe() -> ReplicaInfo | None:
        sent = time.monotonic()
        try:
            last[:] = cloud.list_app_replicas(resource_group, app)
        except NotFound:  # ARM may answer 404 for a moment right after the create: not yet
            return None
        running = next((r for r in last if _running(r)), None)
        if running is not None:
            if seen_at is not None:
                seen_at.append(sent)
            return running
        details = replica_details(last)
        if fatal_text(details) is not None:
            # the events carry the runtime's message when the replica only shows a back-off state
            reason = fatal_text(details + safe_events(cloud, resource_group, app=app))
            raise ContainerRefused(f"{app}: {reason}", code="ContainerRefused")
        return None

    def describe() -> str:
        why = replica_details(last) + safe_events(cloud, resource_group, app=app)
        return "; ".join(why) if why else "no replica was scheduled"

    looks = Waiter(interval=min(waiter.interval, LOOK_S), cancel=waiter.cancel)
    return looks.until(f"a running replica of {app}", probe, timeout=timeout, describe=describe)


def run_exec(
    cloud: Cloud,
    resource_group: str,
    app: str,
    argv: Sequence[str],
    waiter: Waiter,
    *,
    timeout: float = EXEC_TIMEOUT_S,
    retry_incomplete: bool = True,
) -> ExecResult:
    """One non-interactive command; reconnects when the session ends before reporting an exit code.

    With `retry_incomplete` (idempotent commands such as nvidia-smi) a session that never completes
    is InfraError; otherwise the incomplete result is returned for the caller to judge.
    """
    result: ExecResult | None = None
    lost = ""
    for attempt in range(1, EXEC_ATTEMPTS + 1):
        try:
            result = cloud.exec(resource_group, app, list(argv), timeout=timeout)
        except (CloudError, InfraError) as exc:
            lost = exc.message
            if attempt == EXEC_ATTEMPTS:
                raise InfraError(
                    f"lost the exec session to {app} running {argv[0]} ({EXEC_ATTEMPTS} attempts): {lost}",
                    code=exc.code or "ExecLost",
                ) from exc
        else:
            if result.exit_code is not None or not retry_incomplete:
                return result
            lost = "the session ended before the command's exit status arrived"
        waiter.cancel.wait(waiter.interval)
    raise InfraError(
        f"lost the exec session to {app} running {argv[0]} ({EXEC_ATTEMPTS} attempts): {lost}",
        code="ExecLost",
    )


def probe_health(
    cloud: Cloud, resource_group: str, app: str, waiter: Waiter, gpu_count: int
) -> tuple[HealthReport, str]:
    """`nvidia-smi -q` (and `topo -m` for several GPUs) judged per GPU; a lost session is "not read".

    Health is evidence on top of the table's verdict: an exec that cannot complete leaves it unread
    (said so in the report), never a GPU failure."""
    try:
        query = run_exec(cloud, resource_group, app, ["nvidia-smi", "-q"], waiter)
    except InfraError as exc:
        return HealthReport(None, error=f"nvidia-smi -q: {exc.message}"), ""
    if query.exit_code != 0:
        why = (query.output.strip() or query.stderr.strip())[:200]
        return HealthReport(None, error=f"nvidia-smi -q exited {query.exit_code}: {why}"), query.output
    topology = None
    if gpu_count > 1:
        try:
            topo = run_exec(cloud, resource_group, app, ["nvidia-smi", "topo", "-m"], waiter)
            topology = topo.output if topo.exit_code == 0 else None
        except InfraError:
            topology = None
    return assess(query.output, topology), query.output


def probe_smi(cloud: Cloud, resource_group: str, app: str, waiter: Waiter) -> ProbeResult:
    """`nvidia-smi` and its CSV query, parsed: a failure state of nvidia-smi itself is a GPU verdict;
    then `nvidia-smi -q` for the health of every GPU (probe_health)."""
    table = run_exec(cloud, resource_group, app, ["nvidia-smi"], waiter)
    try:
        query = run_exec(cloud, resource_group, app, checks.SMI_QUERY, waiter)
    except InfraError:
        query = ExecResult(tuple(checks.SMI_QUERY), "", "", None)  # the table is what judges
    result = read_smi(table, query)
    if result.error:
        return result
    health, raw = probe_health(cloud, resource_group, app, waiter, len(result.gpus))
    return replace(result, health=health, raw_health=raw)


def health_of(
    health: ExecResult | None, topology: ExecResult | None = None
) -> tuple[HealthReport | None, str]:
    """A probe job's `nvidia-smi -q` part judged (None when the job printed none), with the GPUs'
    links from its `topo -m` part when that answered."""
    if health is None:
        return None, ""
    if health.exit_code != 0:
        why = health.output.strip()[:200]
        return HealthReport(None, error=f"nvidia-smi -q exited {health.exit_code}: {why}"), health.output
    links = topology.output if topology is not None and topology.exit_code == 0 else None
    return assess(health.output, links), health.output


def read_smi(
    table: ExecResult,
    query: ExecResult,
    health: ExecResult | None = None,
    topology: ExecResult | None = None,
) -> ProbeResult:
    """The one way a probe's nvidia-smi table, CSV query, `-q` and `topo -m` become a ProbeResult
    (exec or job)."""
    parsed = nvidia_smi.parse(table.output)
    csv_parsed = nvidia_smi.parse(query.output) if query.exit_code == 0 else None
    gpus = [g.as_dict() for g in parsed.gpus] or (
        [g.as_dict() for g in csv_parsed.gpus] if csv_parsed else []
    )
    error = parsed.error
    if table.exit_code != 0 and not error:
        error = (table.output.strip() or table.stderr.strip() or f"nvidia-smi exited {table.exit_code}")[:300]
    if error == nvidia_smi.UNRECOGNIZED and table.exit_code == 0 and csv_parsed is not None and csv_parsed.ok:
        error = None  # an unfamiliar table layout, but the query answered: the GPU is fine
    several = len(gpus) > 1  # one GPU's matrix says nothing
    report, raw_health = (None, "") if error else health_of(health, topology if several else None)
    return ProbeResult(
        driver_version=parsed.driver_version or (csv_parsed.driver_version if csv_parsed else None),
        cuda_version=parsed.cuda_version,
        gpus=tuple(gpus),
        error=error,
        exit_code=table.exit_code,
        raw=table.output,
        raw_query=query.output,
        health=report,
        raw_health=raw_health,
    )


@contextmanager
def awake_explorer(
    cloud: Cloud,
    run: Run,
    waiter: Waiter,
    *,
    timeout: float = WAKE_TIMEOUT_S,
    progress: Progress | None = None,
    on_asleep: Callable[[float], None] | None = None,
) -> Iterator[None]:
    """A kept run's explorer is stopped between uses: start it for one command, then stop it again.

    The wake takes minutes on Azure, so it is a progress step: the user sees what is awaited. Once
    stopped again, `on_asleep` gets the wake's measured life (its replica seen running to the stop
    accepted): ARM keeps no record of a stopped app's replicas, so the caller keeps it."""
    rg, app = run.resource_group, run.names.explorer
    info = cloud.get_app(rg, app)
    if info is None:
        raise NotFound(f"run {run.run_id} has no explorer app {app}")
    asleep = (info.running_status or "").lower() == STOPPED.lower() or not info.max_replicas
    # awake, the replica is normally there at once; a wait for it still says so once it lasts
    step = (progress or NullProgress()).step(WAKE_STEP if asleep else "explorer replica")
    began: float | None = None  # its replica seen running: the wake bills from there
    try:
        with step:
            if asleep and not info.max_replicas:  # put to sleep by an older acagpu, at zero replicas
                cloud.scale_app(rg, app, 1, 1)
            elif asleep:
                cloud.start_app(rg, app)
            asked = time.monotonic()
            seen_at: list[float] = []
            wait_started(cloud, rg, app, waiter, timeout=timeout, seen_at=seen_at)
            began = seen_at[0] if seen_at else asked
        yield
    finally:
        if asleep:
            try:
                with (progress or NullProgress()).step("stop explorer"):
                    cloud.stop_app(rg, app)
                if on_asleep is not None and began is not None:
                    on_asleep(time.monotonic() - began)
            except AcaGpuError as exc:
                raise InfraError(
                    f"could not stop the explorer {app} again: {exc.message}",
                    hint=f"acagpu down --run-id {run.run_id} removes the run",
                ) from exc


def explorer_smi(
    cloud: Cloud,
    run: Run,
    waiter: Waiter,
    *,
    start_timeout: float = WAKE_TIMEOUT_S,
    progress: Progress | None = None,
    on_asleep: Callable[[float], None] | None = None,
) -> tuple[NvidiaSmi, ExecResult]:
    """`acagpu smi` live: nvidia-smi in the run's explorer, parsed, with the raw session result."""
    with awake_explorer(cloud, run, waiter, timeout=start_timeout, progress=progress, on_asleep=on_asleep):
        table = run_exec(cloud, run.resource_group, run.names.explorer, ["nvidia-smi"], waiter)
    return nvidia_smi.parse(table.output), table


def exec_command(
    cloud: Cloud,
    run: Run,
    argv: Sequence[str],
    waiter: Waiter,
    *,
    timeout: float,
    start_timeout: float = WAKE_TIMEOUT_S,
    progress: Progress | None = None,
    on_asleep: Callable[[float], None] | None = None,
) -> tuple[ExecResult, float]:
    """`acagpu exec`: the result and the seconds its session took (the wake not counted), so the
    caller can tell a command cut at --timeout from a session lost on the way.

    Only a failed connection is retried: a session that dropped mid-command may already have run it.
    """
    with awake_explorer(cloud, run, waiter, timeout=start_timeout, progress=progress, on_asleep=on_asleep):
        started = time.monotonic()
        result = run_exec(
            cloud,
            run.resource_group,
            run.names.explorer,
            argv,
            waiter,
            timeout=timeout,
            retry_incomplete=False,
        )
        return result, time.monotonic() - started
