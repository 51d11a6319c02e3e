"""`acagpu run`: build the runtime for a `RunSpec` (ACA or this machine's), then the run engine.

The engine owns the order, Ctrl-C (the first stops the container and tears down, exit 130; the
second leaves the run and prints the command that removes it), region failover and teardown; the
runtime runs the workload; `WorkloadOutcome` turns it into `docker run`'s exit code and one document.
"""

from __future__ import annotations

from dataclasses import replace

from aca_gpu.models import Cloud
from aca_gpu.output import Output
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine.core import Engine
from aca_gpu.workflow.spend import ledger
from aca_gpu.workflow.workload.masking import masker
from aca_gpu.workflow.workload.outcome import Console, WorkloadOutcome
from aca_gpu.workflow.workload.plan import RunSpec


def console_for(output: Output, spec: RunSpec | None = None) -> Console:
    """Live lines on a human run; collected into the document with -o json (stdout stays one JSON);
    the run's `--secret-env` values masked in both."""
    console = Console(not output.is_json, lambda: output.stdout, lambda: output.stderr)
    console.mask = masker(spec.workload.secret_values.values() if spec is not None else ())
    return console


def run_local(spec: RunSpec, output: Output, waiter: Waiter | None = None) -> WorkloadOutcome:
    """The workload on Docker, Podman or Apptainer here (BadInput when that runtime cannot run)."""
    from aca_gpu.local import detect
    from aca_gpu.local.gpus import parse_gpus
    from aca_gpu.local.probe import LocalTarget
    from aca_gpu.workflow.workload.local import LocalWorkloadRuntime

    gpus = parse_gpus(spec.gpus)
    status, why = detect.choose(spec.runtime)
    assert status.binary is not None
    target = LocalTarget(status.name, status.binary, gpus, spec.podman_gpu, None, spec.plan.run_id)
    console = console_for(output, spec)
    runtime = LocalWorkloadRuntime(target, why, spec, console)
    outcome = WorkloadOutcome(
        plan=spec.plan, runtime=runtime.name, spec=spec, console=console, commands=runtime.commands
    )
    Engine(spec.plan, runtime, output, waiter or Waiter(interval=0.5), outcome=outcome).run()
    outcome.result = runtime.result
    return outcome


def run_aca(
    cloud: Cloud, spec: RunSpec, output: Output, waiter: Waiter, console: Console | None = None
) -> WorkloadOutcome:
    """The workload as a job on Azure Container Apps: a run-scoped group and environment, or `--env`."""
    from aca_gpu.workflow.workload.aca import runtime_for

    console = console or console_for(output, spec)
    plan, runtime = runtime_for(cloud, spec.plan, waiter, spec, console)  # cold, or `--env`
    outcome = WorkloadOutcome(plan=plan, runtime="aca", spec=replace(spec, plan=plan), console=console)
    Engine(plan, runtime, output, waiter, outcome=outcome).run()
    outcome.result = runtime.result
    made = getattr(runtime, "shares_made", None)  # a warm runtime's --create-share
    outcome.shares = made.as_dict() if made is not None else None
    ledger.record(cloud, outcome)  # the estimate `acagpu cost` sets beside the bill
    return outcome
