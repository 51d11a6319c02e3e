"""`acagpu emulator serve`: run the ARM + ACA emulator in the foreground for a second shell to use."""

from __future__ import annotations

import shlex
from pathlib import Path

import click


@click.group()
def emulator() -> None:
    """The local Azure Container Apps emulator (needs the `acagpu[emulator]` extra)."""


@emulator.command()
@click.option("--port", type=int, default=0, show_default=True, help="Port on 127.0.0.1 (0 = any free port).")
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0, min_open=True),
    default=0.02,
    show_default=True,
    help="Multiplier on realistic Azure durations (0.02: env delete ~11 s).",
)
@click.option(
    "--workload",
    type=click.Choice(["simulated", "host"]),
    default="simulated",
    show_default=True,
    help="simulated GPUs, or this host's real nvidia-smi and tester.",
)
@click.option("--driver-version", default=None, help="Host driver version the emulated fleet reports.")
@click.option(
    "--faults", default=None, envvar="ACAGPU_EMULATOR_FAULTS", help="Fault spec, e.g. '429:count=2'."
)
@click.option(
    "--registered/--unregistered",
    default=False,
    show_default=True,
    help="Start with Microsoft.App registered (a fresh subscription is not).",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the ACAGPU_* variables to this file.",
)
def serve(
    port: int,
    time_scale: float,
    workload: str,
    driver_version: str | None,
    faults: str | None,
    registered: bool,
    env_file: Path | None,
) -> None:
    """Serve until Ctrl-C; print the `export ACAGPU_...` lines a second shell needs."""
    from aca_gpu.emulator.server import EmulatorServer

    server = EmulatorServer(
        port=port,
        time_scale=time_scale,
        workload=workload,
        driver_version=driver_version,
        faults=faults,
        registered=registered,
    )
    server.start()
    lines = [f"export {k}={shlex.quote(v)}" for k, v in server.client_env().items()]
    if env_file is not None:
        env_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    click.echo("\n".join(lines))
    click.echo(f"# acagpu emulator listening on {server.endpoint} (Ctrl-C to stop)", err=True)
    server.serve_forever()
