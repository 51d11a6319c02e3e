"""Shared pieces of the run commands: the run selector options, settings, and the embedded emulator."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import click

from aca_gpu.config import Settings, load_settings
from aca_gpu.workflow.base.context import RunRef, Waiter

if TYPE_CHECKING:  # the run engine is for the commands that run: `status`, `env list` need not load it
    from aca_gpu.workflow.engine.plan import Plan

F = TypeVar("F", bound=Callable[..., Any])

EMULATOR_TIME_SCALE = 0.02  # a whole `up` against the emulator takes well under a minute
EMULATOR_POLL_S = 0.05


def run_options(func: F) -> F:
    """--run-id, -g/--resource-group, --subscription; the command receives `ref: RunRef` and `settings`."""

    @functools.wraps(func)
    def wrapper(
        *args: Any, run_id: str | None, resource_group: str | None, subscription: str | None, **kw: Any
    ) -> Any:
        ref = RunRef(run_id=run_id, resource_group=resource_group).validate()
        return func(*args, ref=ref, settings=command_settings(subscription), **kw)

    wrapped: Any = click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION).")(
        wrapper
    )
    wrapped = click.option("-g", "--resource-group", help="The run's resource group (instead of --run-id).")(
        wrapped
    )
    wrapped = click.option("--run-id", help="Which run (default: the only one there is).")(wrapped)
    return wrapped  # type: ignore[no-any-return]


WAKE_TIMEOUT = "15m"


def start_timeout_option(func: F) -> F:
    """--start-timeout of the commands that wake a kept run's stopped explorer (`smi`, `exec`)."""
    option = click.option(
        "--start-timeout",
        default=WAKE_TIMEOUT,
        show_default=True,
        help="Deadline for a kept run's stopped explorer to start (exit 4 after it).",
    )
    return option(func)


def command_settings(subscription: str | None = None) -> Settings:
    shell = load_settings()
    other = subscription is not None and subscription.lower() != (shell.subscription or "").lower()
    return shell.with_overrides(subscription=subscription, named_subscription=subscription if other else None)


def waiter_for(settings: Settings) -> Waiter:
    return Waiter(interval=settings.polling_interval)


def emulator_faults() -> str | None:
    """`ACAGPU_EMULATOR_FAULTS` for the embedded emulator, checked before anything starts (bad: exit 2)."""
    spec = os.environ.get("ACAGPU_EMULATOR_FAULTS", "").strip()
    if not spec:
        return None
    from aca_gpu.emulator.faults import FaultSpecError, parse  # type: ignore[import-untyped,unused-ignore]

    try:
        parse(spec)
    except FaultSpecError as exc:
        raise click.UsageError(f"ACAGPU_EMULATOR_FAULTS: {exc}") from exc
    return spec


MIN_EMULATED_START_S = 2.0  # a scaled deadline still leaves the emulator's polls a few rounds


def emulated_plan(plan: Plan, time_scale: float | None) -> Plan:
    """The plan's start deadline on the emulator's clock: `--start-timeout 15m` at 0.02 of real time
    waits 18 s, as every emulated duration is scaled, instead of 15 real minutes."""
    scale = time_scale or EMULATOR_TIME_SCALE
    return dataclasses.replace(plan, start_timeout_s=max(MIN_EMULATED_START_S, plan.start_timeout_s * scale))


@contextmanager
def emulator_settings(settings: Settings, time_scale: float | None) -> Iterator[Settings]:
    """Run the embedded emulator in a thread and point the settings at it; stop it afterwards."""
    try:
        from aca_gpu.emulator.server import EmulatorServer  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:  # the emulator extra is not installed
        raise click.UsageError(
            f"--emulator: the emulator's dependencies are missing ({exc}); reinstall acagpu"
        ) from exc
    faults = emulator_faults()
    server = EmulatorServer(time_scale=time_scale or EMULATOR_TIME_SCALE, workload="simulated", faults=faults)
    server.start()
    try:
        env = server.client_env()
        # the embedded emulator ends with the command: no hint names its subscription
        yield dataclasses.replace(
            settings.with_overrides(
                arm_endpoint=env.get("ACAGPU_ARM_ENDPOINT"),
                ca_bundle=env.get("ACAGPU_CA_BUNDLE"),
                token=env.get("ACAGPU_TOKEN"),
                subscription=env.get("ACAGPU_SUBSCRIPTION"),
                polling_interval=EMULATOR_POLL_S,
            ),
            named_subscription=None,
        )
    finally:
        server.stop()


def launch(
    output: Any,
    flags: dict[str, Any],
    settings: Settings,
    spec: Any,
    plan_text: str,
    warnings: Iterable[str],
    go: Callable[[Any, Any, Waiter], Any],
    render: Callable[[dict[str, Any]], str],
) -> None:
    """After the plan of a fan-out or a queue run: its warnings, the one `--yes` question, the run
    (on the embedded emulator with `--emulator`, its start deadline on that clock), and its one
    document, ending with the run's own exit code. `spec` has a `run.plan` (FanoutSpec, QueueSpec);
    `go(cloud, spec, waiter)` runs it and returns an outcome with `document()` and `exit_code`."""
    from aca_gpu.cli.options import confirm
    from aca_gpu.workflow.base.context import open_cloud

    for warning in warnings:
        output.warn(warning)
    confirm(plan_text + "\nCreate these billable resources?", yes=flags["yes"] or flags["emulator"],
            refusal="not creating billable resources")  # fmt: skip
    scope = emulator_settings(settings, flags["time_scale"]) if flags["emulator"] else nullcontext(settings)
    with scope as active:
        if flags["emulator"]:
            run = dataclasses.replace(spec.run, plan=emulated_plan(spec.run.plan, flags["time_scale"]))
            spec = dataclasses.replace(spec, run=run)
        outcome = go(open_cloud(active), spec, waiter_for(active))
    result = outcome.document()
    output.emit(result, lambda _stdout: print(render(result), file=output.stderr, flush=True))
    if outcome.exit_code:
        raise SystemExit(outcome.exit_code)
