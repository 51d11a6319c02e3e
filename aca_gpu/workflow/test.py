"""`acagpu test`: rerun the gpu-tester on an existing run, follow it, parse the result (exit 5 on fail)."""

from __future__ import annotations

import time
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import EXIT_GPU_CHECK, NotFound
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow import checks
from aca_gpu.workflow.context import Run, Waiter
from aca_gpu.workflow.tester_run import TesterRun, follow_result

DEFAULT_TIMEOUT_S = 30 * 60.0


def run_test(
    cloud: Cloud,
    run: Run,
    progress: Progress,
    waiter: Waiter,
    *,
    start_timeout: float = 15 * 60.0,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> tuple[dict[str, Any], int]:
    rg, job = run.resource_group, run.names.tester
    if cloud.get_job(rg, job) is None:
        raise NotFound(f"run {run.run_id} has no tester job {job}", hint="`acagpu up --keep` makes one")
    phases: dict[str, float] = {}
    with progress.step("test run") as step:
        began = time.monotonic()
        tester = TesterRun(execution=cloud.start_job(rg, job))
        result = follow_result(
            cloud, rg, job, tester, waiter, timeout=start_timeout + timeout, environment=run.names.environment
        )
        if tester.first_line is not None:
            phases["tester start"] = round(tester.first_line - began, 3)
        step.update(f"{result.get('status', '?')} ({tester.execution})")
        failed = checks.tester_failed(result)
        if failed:
            step.status = "fail"
    phases["test run"] = round(step.elapsed, 3)
    profile = None
    alias = run.tags.get(naming.TAG_GPU)
    if alias:
        profile = checks.resolve_profile(alias)
    cost = (
        checks.cost_estimate(profile, tester.seconds, run.group.location, label="measured tester lifetime")
        if profile
        else {"gpu_seconds": round(tester.seconds, 1), "usd_estimate": None, "basis": "unknown GPU"}
    )
    doc = {
        "command": "test",
        "run_id": run.run_id,
        "status": "gpu_check_failed" if failed else "ok",
        "execution": tester.execution,
        "result": result,
        "phases": phases,
        "cost": cost,
    }
    return doc, EXIT_GPU_CHECK if failed else 0
