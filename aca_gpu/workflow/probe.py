"""nvidia-smi and arbitrary commands in a run's CUDA explorer (`acagpu smi`, `acagpu exec`, `up`'s probe).

The exec websocket can drop mid-command (the session then ends without the exit marker), so a
command is retried a few times before the missing exit code is reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from aca_gpu.errors import CloudError, NotFound
from aca_gpu.gpu import nvidia_smi
from aca_gpu.gpu.nvidia_smi import NvidiaSmi
from aca_gpu.models import Cloud, ExecResult
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Run, Waiter
from aca_gpu.workflow.replicas import wait_app_replica

EXEC_ATTEMPTS = 3
EXEC_TIMEOUT_S = 180.0
WAKE_TIMEOUT_S = 15 * 60.0


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
    """One non-interactive command; reconnects when the session ends before reporting an exit code."""
    result: ExecResult | None = None
    for attempt in range(1, EXEC_ATTEMPTS + 1):
        try:
            result = cloud.exec(resource_group, app, list(argv), timeout=timeout)
        except CloudError:
            if attempt == EXEC_ATTEMPTS:
                raise
        else:
            if result.exit_code is not None or not retry_incomplete:
                return result
        waiter.cancel.wait(waiter.interval)
    assert result is not None
    return result


def probe_smi(cloud: Cloud, resource_group: str, app: str, waiter: Waiter) -> dict[str, Any]:
    """Run `nvidia-smi` and its CSV query; returns parsed fields plus raw text of both."""
    table = run_exec(cloud, resource_group, app, ["nvidia-smi"], waiter)
    query = run_exec(cloud, resource_group, app, checks.SMI_QUERY, waiter)
    parsed = checks.smi_dict(checks.parse_smi(table.output))
    csv_parsed = checks.smi_dict(checks.parse_smi(query.output)) if query.exit_code == 0 else {}
    gpus = parsed.get("gpus") or csv_parsed.get("gpus") or []
    error = parsed.get("error")
    if table.exit_code not in (0, None) and not error:
        error = (table.output.strip() or table.stderr.strip() or f"nvidia-smi exited {table.exit_code}")[:300]
    return {
        "driver_version": parsed.get("driver_version") or csv_parsed.get("driver_version"),
        "cuda_version": parsed.get("cuda_version"),
        "gpus": gpus,
        "error": error,
        "exit_code": table.exit_code,
        "raw": table.output,
        "raw_query": query.output,
    }


@contextmanager
def awake_explorer(
    cloud: Cloud, run: Run, waiter: Waiter, *, timeout: float = WAKE_TIMEOUT_S
) -> Iterator[None]:
    """A kept run's explorer sleeps at zero replicas: wake it for one command, then put it back."""
    rg, app = run.resource_group, run.names.explorer
    info = cloud.get_app(rg, app)
    if info is None:
        raise NotFound(f"run {run.run_id} has no explorer app {app}")
    asleep = not info.max_replicas
    if asleep:
        cloud.scale_app(rg, app, 1, 1)
    try:
        wait_app_replica(cloud, rg, app, waiter, timeout=timeout)
        yield
    finally:
        if asleep:
            cloud.scale_app(rg, app, 0, 0)


def explorer_smi(cloud: Cloud, run: Run, waiter: Waiter) -> tuple[NvidiaSmi, ExecResult]:
    """`acagpu smi` live: nvidia-smi in the run's explorer, parsed, with the raw session result."""
    with awake_explorer(cloud, run, waiter):
        table = run_exec(cloud, run.resource_group, run.names.explorer, ["nvidia-smi"], waiter)
    return nvidia_smi.parse(table.output), table


def exec_command(
    cloud: Cloud, run: Run, argv: Sequence[str], waiter: Waiter, *, timeout: float
) -> ExecResult:
    """`acagpu exec`: the remote exit code becomes ours; no TTY needed.

    Only a failed connection is retried: a session that dropped mid-command may already have run it.
    """
    with awake_explorer(cloud, run, waiter):
        return run_exec(
            cloud,
            run.resource_group,
            run.names.explorer,
            argv,
            waiter,
            timeout=timeout,
            retry_incomplete=False,
        )
