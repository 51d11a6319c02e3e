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

# command name -> "module:attribute" (module relative to aca_gpu.cli)
COMMANDS: dict[str, str] = {
    "up": "up:up",
    "down": "down:down",
    "status": "status:status",
    "smi": "smi:smi",
    "exec": "exec_cmd:exec_cmd",
    "logs": "logs:logs",
    "test": "test_cmd:test_cmd",
    "profiles": "profiles:profiles",
    "compat": "compat:compat",
    "tester-report": "tester_report:tester_report",
    "validate": "validate:validate",
    "reap": "reap:reap",
    "tags": "tags:tags",
    "report": "report:report",
    "ci": "ci:ci",
    "emulator": "emulator:emulator",
}


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(f"aca_gpu.cli.{module}") is not None


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _available(name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _available(cmd_name):
            return None
        module_name, attr = target.split(":")
        module = importlib.import_module(f"aca_gpu.cli.{module_name}")
        command: click.Command = getattr(module, attr)
        return command

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
