"""The nvidia-smi probe as a job execution: the image under test runs nvidia-smi and exits.

No app, no revision, no exec session: one start with a per-execution template whose command prints
the nvidia-smi table, the CSV query and `nvidia-smi -q` (the GPUs' health), each followed by a line
with its exit status, so the probe's
GPU-seconds end with its command. The lines are read with `executions.follow` and judged by the same
`probe.read_smi` as the explorer's exec, so both ways give one kind of ProbeResult.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from functools import partial

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, ContainerRefused, InfraError, NotFound, WaitTimedOut
from aca_gpu.gpu.profiles import GpuProfile
from aca_gpu.models import Cloud, ContainerDef, ExecResult, ReplicaInfo
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.base.threads import spawn
from aca_gpu.workflow.engine import capacity, executions
from aca_gpu.workflow.engine.outcome import ProbeResult
from aca_gpu.workflow.engine.plan import Pair
from aca_gpu.workflow.engine.probe import fatal_text, read_smi
from aca_gpu.workflow.engine.replicas import event_owner, owner_events, replica_details, safe_events
from aca_gpu.workflow.engine.single_task import answer, run_execution
from aca_gpu.workflow.engine.spend_cap import SpendCap
from aca_gpu.workflow.engine.task_records import PLATFORM, USER, RetryPolicy, Verdict
from aca_gpu.workflow.preflight import drivers

TABLE_END = "ACAGPU_SMI_TABLE_EXIT="
QUERY_END = "ACAGPU_SMI_QUERY_EXIT="
TOPO_END = "ACAGPU_SMI_TOPO_EXIT="
HEALTH_END = "ACAGPU_SMI_HEALTH_EXIT="
MARKERS = (TABLE_END, QUERY_END, TOPO_END, HEALTH_END)
# The probe is a task like a shard (engine/task_runner.py): a reading lost in transport (a finished
# execution whose lines could not be read) is the platform's fault and is started once more; a
# container the runtime refused, or a shell that exited before nvidia-smi, is the image's and is not
RETRY = RetryPolicy(retries=0, platform_retries=1)
ATTEMPTS = 1 + RETRY.platform_retries
RUN_TIMEOUT_S = 180.0  # nvidia-smi takes seconds; this bounds a hung driver call
# After its last line the probe stays this long, so a client polling every 5 s still finds the
# replica and reads its log (ACA removes a finished replica, and its log, within seconds). The client
# stops at the last line and deletes the job, which ends the replica: the grace rarely bills.
GRACE_S = 10
DRIVER_LOOK_S = 2.0  # the job's events are read this often (at most) until its GpuDriverInfo is said


def probe_script() -> str:
    """One shell line: the table, the CSV query, `nvidia-smi topo -m` (how several GPUs are linked)
    and `nvidia-smi -q`, each with its status (stderr kept in the log), then the grace."""
    query = shlex.join(checks.SMI_QUERY)
    return (
        f'nvidia-smi 2>&1; echo "{TABLE_END}$?"; {query} 2>&1; echo "{QUERY_END}$?"; '
        f'nvidia-smi topo -m 2>&1; echo "{TOPO_END}$?"; '
        f'nvidia-smi -q 2>&1; echo "{HEALTH_END}$?"; sleep {GRACE_S}'
    )


def probe_job_name(pair: Pair) -> str:
    """The pair's probe job, named after its explorer (`cuda-probe-…` for `cuda-explorer-…`)."""
    return naming.validate_aca_name(pair.probe, "job")


def probe_container(image: str, profile: GpuProfile) -> ContainerDef:
    return ContainerDef(
        name="cuda-probe",
        image=image,
        cpu=float(profile.container_cpu),
        memory=checks.memory_text(profile),
        command=("/bin/sh", "-c", probe_script()),
    )


def _status(line: str, marker: str) -> int | None:
    text = line.split(marker, 1)[1].strip()
    return int(text) if text.isdigit() else None


def split_output(lines: Sequence[str]) -> tuple[ExecResult, ExecResult, ExecResult, ExecResult | None] | None:
    """(table, query, -q, topo -m) as exec results, or None while the last status line has not been
    read. Each part is the text before its own status line, so a probe of an older acagpu (no
    `topo -m`) reads the same; topology is None when it was not printed."""
    parts: dict[str, tuple[str, int | None]] = {}
    pending: list[str] = []
    for line in lines:
        marker = next((m for m in MARKERS if m in line), None)
        if marker is None:
            pending.append(line)
            continue
        parts[marker] = ("\n".join(pending), _status(line, marker))
        pending = []
        if marker == HEALTH_END:
            break
    else:
        return None
    if TABLE_END not in parts or QUERY_END not in parts:
        return None

    def part(marker: str, argv: tuple[str, ...]) -> ExecResult:
        text, code = parts[marker]
        return ExecResult(argv, text, "", code)

    topo = part(TOPO_END, ("nvidia-smi", "topo", "-m")) if TOPO_END in parts else None
    return (
        part(TABLE_END, ("nvidia-smi",)),
        part(QUERY_END, tuple(checks.SMI_QUERY)),
        part(HEALTH_END, ("nvidia-smi", "-q")),
        topo,
    )


def probe_phases(run: executions.ExecutionRun, requested: float, looked: float) -> tuple[float, float]:
    """(start_s, smi_s): from the start request to the container running, and its run. The log
    follower and the look that waits for the start run side by side: a short probe's stream can
    see it end before the next look sees it started, so the look's moment is only a fallback and
    never later than the end (`phases."nvidia-smi"` was negative in 3 of 6 runs at 5 s polling)."""
    end = run.ended if run.ended is not None else time.monotonic()
    began = run.running if run.running is not None else run.first_line
    began = min(looked if began is None else began, looked, end)
    return round(max(0.0, began - requested), 3), round(max(0.0, end - began), 3)


def wait_execution_started(
    cloud: Cloud,
    resource_group: str,
    job: str,
    execution: str,
    waiter: Waiter,
    *,
    timeout: float,
    environment: tuple[str, str] | None = None,
    run: executions.ExecutionRun | None = None,
    driver_check: Callable[[str], str | None] | None = None,
) -> None:
    """Until the execution's container runs (or already ended); ContainerRefused as soon as the
    platform says it never will (CUDA requirement, image pull), with the runtime's own text.
    `environment` (its group, its name) is where the job's events are read.

    The container bills from its start, so `run.running` is set by the look that first sees it
    (looks at least every second, whatever the polling interval): a container first seen already
    ended started after the look before, which is its start then (an upper bound, never 0 s).

    `driver_check` gets the driver the job's `GpuDriverInfo` event names, once, as soon as it is
    said (before the container starts; the events are read every DRIVER_LOOK_S until then); a text
    back stops the wait as ContainerRefused (exit 5)."""
    last: list[ReplicaInfo] = []
    said: list[str] = []
    driver_looked = [0.0]
    driver_every = min(DRIVER_LOOK_S, waiter.interval)
    seen_details: list[str] = []  # every replica detail seen at any look: evidence outlives the replica
    looked = [time.monotonic()]  # the latest look that did not see the container

    def events() -> list[str]:
        if environment is None:
            return safe_events(cloud, resource_group, app=job)
        return owner_events(cloud, *environment, job)

    def seen(state: str, before: float) -> None:
        if run is not None and run.running is None:
            run.running = time.monotonic() if state == "running" else before

    def started() -> bool | None:
        before, looked[0] = looked[0], time.monotonic()
        if driver_check is not None and not said and looked[0] - driver_looked[0] >= driver_every:
            driver_looked[0] = looked[0]
            driver = driver_said(cloud, resource_group, job, environment)
            if driver is not None:
                said.append(driver)
                refusal = driver_check(driver)
                if refusal is not None:
                    raise ContainerRefused(f"{job}: {refusal}", code="DriverTooOld")
        try:
            last[:] = cloud.list_execution_replicas(resource_group, job, execution)
        except NotFound:
            last[:] = []
        for replica in last:
            states = [(c.running_state or "").lower() for c in replica.containers]
            states = states or [(replica.running_state or "").lower()]
            for state in ("running", "terminated"):
                if state in states:
                    seen(state, before)
                    return True
        details = replica_details(last)
        seen_details.extend(d for d in details if d not in seen_details)
        if fatal_text(details) is not None:
            reason = fatal_text(details + events())
            raise ContainerRefused(f"{job}: {reason}", code="ContainerRefused")
        info = executions.get(cloud, resource_group, job, execution)
        if info is None or not info.finished:
            return None
        # ended before it was seen running: a container the runtime refused leaves its reason in
        # the events (its replica may be gone already), and is no reading to retry
        reason = fatal_text(details + events())
        if reason is not None:
            raise ContainerRefused(f"{job}: {reason}", code="ContainerRefused")
        if (info.reason or "") == "DeadlineExceeded":  # its replica timeout passed before a placement
            full = capacity.unplaced(f"the probe execution {execution}", seen_details + events())
            if full is not None:
                raise full
            raise WaitTimedOut(
                f"timed out waiting for a running replica: execution {execution} reached its deadline "
                f"before its container started ({'; '.join(details) or 'no replica was scheduled'})",
                code="ReplicaNotRunning",
            )
        seen("terminated", before)
        return True

    def describe() -> str:
        return "; ".join(replica_details(last)) or "no replica was scheduled"

    try:
        Waiter(interval=min(waiter.interval, 1.0), cancel=waiter.cancel).until(
            f"a running replica of the probe execution {execution}",
            started,
            timeout=timeout,
            describe=describe,
        )
    except WaitTimedOut as exc:
        if waiter.cancel.is_set():
            raise
        full = capacity.unplaced(f"the probe execution {execution}", seen_details + events())
        if full is not None:
            raise full from None  # the platform said why: no room, not a slow start
        raise WaitTimedOut(exc.message, code="ReplicaNotRunning") from None  # a placement failure


def driver_said(
    cloud: Cloud, resource_group: str, job: str, environment: tuple[str, str] | None
) -> str | None:
    """The host driver a job's `GpuDriverInfo` system event names, None while none was said (or
    the events cannot be read: the wait goes on as before)."""
    try:
        if environment is None:
            events = cloud.system_events(resource_group, tail=200, app=job)
        else:
            found = cloud.system_events(environment[0], environment=environment[1], tail=200)
            events = [e for e in found if event_owner(e).lower() == job.lower()]
    except AcaGpuError:
        return None
    for event in events:
        lowered = {str(k).lower(): v for k, v in event.items()}
        if str(lowered.get("reason") or "") == drivers.EVENT:
            driver = drivers.driver_of_event(str(lowered.get("msg") or lowered.get("message") or ""))
            if driver is not None:
                return driver
    return None


def _read_to_the_end(follower: Future[executions.ExecutionRun], waiter: Waiter, reading: Waiter) -> None:
    """The follower's end (its errors are the probe's); the run's cancel (Ctrl-C) reaches it."""
    while True:
        try:
            follower.result(timeout=0.25)
            return
        except FutureTimeout:
            if waiter.cancel.is_set():
                reading.cancel.set()


def probe_job(
    cloud: Cloud,
    resource_group: str,
    job: str,
    container: ContainerDef,
    waiter: Waiter,
    *,
    start_timeout: float,
    environment: str | None = None,
    environment_group: str | None = None,
    runs: list[executions.ExecutionRun] | None = None,
    driver_check: Callable[[str], str | None] | None = None,
    cap: SpendCap | None = None,
) -> ProbeResult:
    """nvidia-smi in one execution of `job` running `container`, as a task of the engine's runner
    (engine/task_runner.py): a reading lost in transport is the platform's and is started once more
    (RETRY); a refused container is the image's and is not. `runs` collects the executions (for
    their measured GPU-seconds). A lost reading is InfraError, never a GPU verdict."""
    requested = time.monotonic()

    def start(token: str) -> executions.ExecutionRun:
        run = executions.start(cloud, resource_group, job, [container], own_token=token, cancel=waiter.cancel)
        if runs is not None:
            runs.append(run)
        return run

    def read(run: executions.ExecutionRun) -> Verdict:
        return _read_probe(
            cloud,
            resource_group,
            job,
            run,
            waiter,
            start_timeout=start_timeout,
            environment=environment,
            environment_group=environment_group,
            driver_check=driver_check,
            requested=requested,
        )

    state = run_execution(
        cloud,
        resource_group,
        job,
        start,
        read,
        policy=RETRY,
        cancel=waiter.cancel,
        label=f"the probe {job}",
        cap=cap,
    )
    verdict = state.verdict
    if verdict is not None and verdict.code == "ProbeLost" and not waiter.cancel.is_set():
        raise InfraError(
            f"could not read the probe's nvidia-smi output ({len(state.attempts)} attempts): {verdict.why}",
            code="ProbeLost",
        )
    result: ProbeResult = answer(state, waiter.cancel)
    return result


def _read_probe(
    cloud: Cloud,
    resource_group: str,
    job: str,
    run: executions.ExecutionRun,
    waiter: Waiter,
    *,
    start_timeout: float,
    environment: str | None,
    environment_group: str | None,
    driver_check: Callable[[str], str | None] | None,
    requested: float,
) -> Verdict:
    """One attempt of the probe, read to its verdict: nvidia-smi's output (the answer), a container
    the runtime refused or whose shell exited before nvidia-smi (the image's: final), a placement
    that never came (final: the wait was spent), or lines lost in transport (the platform's)."""
    place = (environment_group or resource_group, environment) if environment else None
    # the log stream is asked for now, while the image pulls: the service accepting it is the
    # container's start (it bills from then), which a look once a second would miss by up to
    # a second on a probe that lives less than that
    reading = Waiter(interval=waiter.interval)
    follower = spawn(
        partial(
            executions.follow,
            cloud,
            resource_group,
            job,
            run,
            reading,
            timeout=start_timeout + RUN_TIMEOUT_S,
            marker=HEALTH_END,
            environment=environment,
        ),
        "acagpu-probe-log",
    )
    try:
        wait_execution_started(
            cloud,
            resource_group,
            job,
            run.execution,
            waiter,
            timeout=start_timeout,
            environment=place,
            run=run,
            driver_check=driver_check,
        )
    except AcaGpuError as exc:
        reading.cancel.set()  # its container never runs (or the run was cancelled): stop reading
        whose = USER if isinstance(exc, ContainerRefused) else PLATFORM
        return Verdict(whose, exc.code, exc.message, error=exc, retry=False)
    except BaseException:
        reading.cancel.set()
        raise
    looked = time.monotonic()
    _read_to_the_end(follower, waiter, reading)
    parts = split_output(run.lines)
    if parts is not None:
        table, query, health, topology = parts
        result = read_smi(table, query, health, topology)
        start_s, smi_s = probe_phases(run, requested, looked)
        return Verdict(None, value=replace(result, start_s=start_s, smi_s=smi_s))
    code = run.exit_code
    if code not in (None, 0) and not any(TABLE_END in line for line in run.lines):
        said = " | ".join(line.strip() for line in run.lines[-3:] if line.strip())
        refused = ContainerRefused(
            f"{job}: the probe's shell exited {code} before nvidia-smi ran" + (f": {said}" if said else ""),
            code="ContainerRefused",
        )
        return Verdict(USER, refused.code, refused.message, exit_code=code, error=refused, retry=False)
    lost = run.lost or f"execution {run.execution} ended without the probe's last line"
    return Verdict(PLATFORM, "ProbeLost", lost, exit_code=code)
