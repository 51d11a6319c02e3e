"""The `acagpu` command: a lazy Click group so `acagpu --help` imports no Azure SDK.

Each command lives in its own module under aca_gpu/cli/ and is imported only when it runs
(or when --help lists it). Errors are mapped to exit codes here, once.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from aca_gpu import __version__
from aca_gpu.errors import AcaGpuError

# command name -> ("module:attribute" relative to aca_gpu.cli, short help). The short help is listed
# here so `acagpu --help` imports no command module at all; a test keeps it equal to each command's
# own docstring, which stays the source.
COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("up:up", "Provision a GPU environment, run nvidia-smi and the gpu-tester, report, tear down."),
    "down": ("down:down", "Delete a run and wait until its resource group is really gone."),
    "status": ("status:status", "List acagpu runs: age, expiry, phase and estimated spend so far."),
    "smi": ("smi:smi", "Show what nvidia-smi says: driver, highest supported CUDA, GPUs."),
    "exec": (
        "exec_cmd:exec_cmd",
        "Run a command non-interactively in the explorer (no TTY needed); returns the remote exit code.",
    ),
    "logs": ("logs:logs", "Show a run's logs."),
    "test": ("test_cmd:test_cmd", "Start the tester job of a kept run, follow it, and report its result."),
    "profiles": (
        "profiles:profiles",
        "List the ACA GPU workload profiles: type, aliases, GPU, size, regions and an hourly estimate.",
    ),
    "compat": (
        "compat:compat",
        "Judge an image's CUDA version against a host driver using NVIDIA's published tables.",
    ),
    "tester-report": ("tester_report:tester_report", "Parse gpu-tester output into a result."),
    "validate": ("validate:validate", "Validate CUDA images on ACA GPU profiles; exit 5 if any pair fails."),
    "reap": ("reap:reap", "Delete expired acagpu resource groups."),
    "tags": ("tags:tags", "List REPOSITORY's CUDA tags (nvidia/cuda naming), newest first."),
    "report": ("report:report", "Combine and render validation reports."),
    "ci": ("ci:ci", "Set up acagpu in a repository's CI."),
    "emulator": (
        "emulator:emulator",
        "The local Azure Container Apps emulator (needs the `acagpu[emulator]` extra).",
    ),
}


def _available(name: str) -> bool:
    module = COMMANDS[name][0].split(":")[0]
    return importlib.util.find_spec(f"aca_gpu.cli.{module}") is not None


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _available(name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _available(cmd_name):
            return None
        module_name, attr = target[0].split(":")
        module = importlib.import_module(f"aca_gpu.cli.{module_name}")
        command: click.Command = getattr(module, attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands from the static table: importing every command just to print help is slow."""
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AcaGpuError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"error: {exc.message}", err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acagpu")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """GPU workloads on Azure Container Apps in one command.

    `acagpu up` provisions a GPU environment, probes the driver with nvidia-smi, runs the
    gpu-tester benchmark, reports driver / CUDA / GPU / timings / cost, and tears it all down.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="acagpu")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
