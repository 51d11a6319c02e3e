"""The options of the commands that start billable work on a GPU (`up`, `run`, `serve`), spelled once.

A flag that means the same in each (its name, destination, type, metavar) is declared here, so a user
who learnt `-e KEY=VALUE` or `--max-cost USD` on one command finds it alike on the next, and a fix to
one (a type check, a metavar) reaches all. Where a flag does more on one command than on another
(`--mount` also mounts a local folder under `run`; `--max-cost` caps shards under `run`, replicas
under `serve`), the command passes its own help text, which says what it does there.

Each bundle keeps its options in the order given, as if written one above the other at its place
in the command's stack, so `--help` lists them where they always stood.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from aca_gpu.cli.runopts import EMULATOR_TIME_SCALE

F = TypeVar("F", bound=Callable[..., Any])


def stacked(*options: Callable[[Any], Any]) -> Callable[[F], F]:
    """One decorator applying `options` as a stack written top to bottom (Click lists the top first)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


# --gpu, -l/--location: the one container's GPU and region (`up` words both for its explorer and tester)
placement_options = stacked(
    click.option("--gpu", help="GPU alias on ACA: t4, a100, ... (`acagpu profiles --offline`)."),
    click.option("-l", "--location", help="Azure region (default: settings, else eastus)."),
)

# --cpu, --memory: the replica's size when the profile's is not wanted
size_options = stacked(
    click.option(
        "--cpu", type=click.FloatRange(min=0.0, min_open=True), help="vCPU (default: the profile's replica)."
    ),
    click.option("--memory", help="Memory, e.g. 16Gi (default: the profile's replica)."),
)

# --emulator, --time-scale, --subscription: where the command runs
target_options = stacked(
    click.option("--emulator", is_flag=True, help="Run against the embedded emulator instead of Azure."),
    click.option(
        "--time-scale",
        type=click.FloatRange(min=0.0001),
        help=f"Emulator speed (default {EMULATOR_TIME_SCALE:g} of real time).",
    ),
    click.option("--subscription", help="Subscription id (default: ACAGPU_SUBSCRIPTION)."),
)


def limit_options(*, max_cost_help: str, wait_help: str) -> Callable[[F], F]:
    """--max-cost USD and --wait-for-capacity DURATION: what the run may spend, how long it may wait
    for room (each command says what the cap stops and what a sweep tries)."""
    return stacked(
        click.option("--max-cost", type=float, metavar="USD", help=max_cost_help),
        click.option("--wait-for-capacity", metavar="DURATION", help=wait_help),
    )


def container_options(*, env_help: str, mount_help: str) -> Callable[[F], F]:
    """--env NAME (a warm environment), -e/--env-var KEY=VALUE, --secret-env NAME, --mount: what the
    user's container runs in and is given."""
    return stacked(
        click.option("--env", "env_name", metavar="NAME", help=env_help),
        click.option(
            "-e",
            "--env-var",
            "env",
            multiple=True,
            metavar="KEY=VALUE",
            help="An environment variable (repeatable).",
        ),
        click.option(
            "--secret-env",
            multiple=True,
            metavar="NAME",
            help="Pass NAME from this environment as a secret (repeatable): never printed, stored or tagged.",
        ),
        click.option("--mount", multiple=True, metavar="SOURCE:/PATH[:ro]", help=mount_help),
    )
