"""The `acagpu` command: a lazy Click group so `acagpu --help` imports no Azure SDK.

Each command lives in its own module under aca_gpu/cli/ and is imported only when it runs
(or when --help lists it). Every failure is mapped here, once (docs/cli.md "Errors and confirmations"): typed
`AcaGpuError`s, Click usage errors (exit 2), Ctrl-C and declined prompts (exit 130) and anything
unexpected (exit 1, the exception's type, no traceback unless --debug) become one `error:` line
on stderr, the JSON error document in `-o json` mode and an `::error::` annotation under --github.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import click

from aca_gpu import __version__
from aca_gpu.cli.current import CURRENT_OUTPUT, EXIT_INTERRUPTED
from aca_gpu.cli.suggest import SuggestingGroup
from aca_gpu.errors import EXIT_BAD_INPUT, EXIT_FAILURE, AcaGpuError

FORMATS = ("table", "json", "tsv")  # output.FORMATS, repeated so `--help` need not import it

# command name -> ("module:attribute" relative to aca_gpu.cli, short help). The short help is listed
# here so `acagpu --help` imports no command module at all; a test keeps it equal to each command's
# own docstring, which stays the source.
COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("up:up", "Provision a GPU environment, run nvidia-smi and the gpu-tester, report, tear down."),
    "down": ("down:down", "Delete a run and wait until its resource group is really gone."),
    "status": ("status:status", "List acagpu runs: age, expiry, phase and estimated spend so far."),
    "cost": (
        "cost:cost",
        "Show each run's estimate beside what Azure Cost Management billed, and flag the differences.",
    ),
    "smi": ("smi:smi", "Show what nvidia-smi says: driver, highest supported CUDA, GPUs, and their health."),
    "exec": (
        "exec_cmd:exec_cmd",
        "Run a command non-interactively in the explorer (no TTY needed); returns the remote exit code.",
    ),
    "logs": ("logs:logs", "Show a run's logs."),
    "test": ("test_cmd:test_cmd", "Start the tester job of a kept run, follow it, and report its result."),
    "check": (
        "check:check",
        "Check credentials, subscription, provider, and per region and GPU: offer, quota, price, driver.",
    ),
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
    "guard": ("guard:guard", "A scheduled reaper in Azure: deletes expired runs without a laptop or CI."),
    "tags": ("tags:tags", "List REPOSITORY's CUDA tags (nvidia/cuda naming), newest first."),
    "report": ("report:report", "Draw a document as a page, or fold validations into a matrix."),
    "ci": ("ci:ci", "Set up acagpu in a repository's CI."),
    "emulator": ("emulator:emulator", "The local Azure Container Apps emulator."),
    "image": ("image:image", "Images for warm environments: stage them in the environment's own registry."),
    "local": (
        "local:local",
        "Run the nvidia-smi probe and the gpu-tester on this machine's Docker, Podman or Apptainer.",
    ),
    "serve": (
        "serve_cmd:serve",
        "Serve IMAGE over HTTPS on a GPU, scale to zero when idle, measure its cold start.",
    ),
    "run": (
        "run_cmd:run",
        "Run IMAGE (and COMMAND) on a GPU, stream its output, exit with its code, tear down.",
    ),
    "attach": (
        "queue_read:attach",
        "Follow a detached queue run until every item is done, then print its results.",
    ),
    "results": (
        "queue_read:results",
        "Print a queue run's results now, every item in item order, done or not.",
    ),
    "env": (
        "env:env",
        "Warm GPU environments: build once, run many times at no idle cost (`up --env NAME`).",
    ),
    "doctor": (
        "doctor:doctor",
        "Diagnose this GPU container host (driver, Docker, Podman, Apptainer) and say how to fix it.",
    ),
}


# loggers of the libraries underneath: their warnings are not ours to print unless --debug
QUIET_LOGGERS = ("azure", "urllib3", "websocket", "asyncio", "aiohttp", "msal", "requests")


def _available(name: str) -> bool:
    module = COMMANDS[name][0].split(":")[0]
    return importlib.util.find_spec(f"aca_gpu.cli.{module}") is not None


def configure_logging(debug: bool) -> None:
    """SDK loggers are silent unless --debug; with it everything goes to stderr."""
    import logging

    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.DEBUG)
        return
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _peek(args: list[str]) -> tuple[str, bool, bool]:
    """(-o format, --github, --debug) from raw arguments, for errors before parsing finished."""
    fmt, github, debug = "table", False, False
    for i, arg in enumerate(args):
        if arg == "--":
            break
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-o", "--output") and nxt in FORMATS:
            fmt = nxt
        elif arg.startswith("--output=") and arg.split("=", 1)[1] in FORMATS:
            fmt = arg.split("=", 1)[1]
        elif arg.startswith("-o") and arg[2:] in FORMATS:
            fmt = arg[2:]
        elif arg == "--github":
            github = True
        elif arg == "--debug":
            debug = True
    return fmt, github, debug


def _peek_command(args: list[str]) -> str:
    """The command path from raw arguments ('report merge'), for errors before a context exists."""
    words: list[str] = []
    group: Any = cli
    for arg in args:
        if arg.startswith("-") or not isinstance(group, click.Group):
            break
        sub = group.get_command(click.Context(group), arg) if isinstance(group, LazyGroup) else None
        if sub is None and isinstance(group, click.Group) and not isinstance(group, LazyGroup):
            sub = group.commands.get(arg)
        if sub is None:
            break
        words.append(arg)
        group = sub
    return " ".join(words)


class LazyGroup(SuggestingGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if _available(name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not _available(cmd_name):
            return None
        module_name, attr = target[0].split(":")
        module = importlib.import_module(f"aca_gpu.cli.{module_name}")
        command: click.Command = getattr(module, attr)
        from aca_gpu.cli.checks import harden

        return harden(command, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List commands from the static table: importing every command just to print help is slow."""
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run a command and map whatever it raises to the error contract, once."""
        argv = list(sys.argv[1:] if args is None else args)
        token = CURRENT_OUTPUT.set(None)
        try:
            code = self._run(argv, prog_name, complete_var, **extra)
        finally:
            output = CURRENT_OUTPUT.get()
            CURRENT_OUTPUT.reset(token)
        _finish_recording(argv, code)
        if output is not None:
            output.finish(code)
        if standalone_mode:
            sys.exit(code)
        return code

    def _run(self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any) -> int:
        _, _, debug = _peek(argv)
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except SystemExit as exc:
            return _exit_code(exc.code)
        except AcaGpuError as exc:
            if debug:
                raise
            _report(argv, exc.message, exc.exit_code, exc.kind, exc.hint)
            return exc.exit_code
        except click.UsageError as exc:
            from aca_gpu.cli.options import command_name

            if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:  # bare `acagpu ci`
                click.echo(exc.ctx.get_help(), err=True)
                return EXIT_BAD_INPUT
            where = command_name(exc.ctx) or _peek_command(argv)
            _report(argv, exc.format_message(), EXIT_BAD_INPUT, "BadInput", None, command=where)
            return EXIT_BAD_INPUT
        except click.ClickException as exc:
            _report(argv, exc.format_message(), exc.exit_code, "BadInput", None)
            return exc.exit_code
        except (click.Abort, KeyboardInterrupt, EOFError):
            if debug:
                raise
            _report(argv, "interrupted", EXIT_INTERRUPTED, "Interrupted", None)
            return EXIT_INTERRUPTED
        except click.exceptions.Exit as exc:
            return exc.exit_code
        except Exception as exc:
            if debug:
                raise
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            message = f"unexpected {type(exc).__name__}" + (f": {detail}" if detail else "")
            _report(argv, message, EXIT_FAILURE, type(exc).__name__, "run again with --debug for details")
            return EXIT_FAILURE
        return result if isinstance(result, int) else 0


def _finish_recording(argv: list[str], code: int) -> None:
    """`--record`: meta.json names the command and its exit code (aca_gpu/recording.py). Imports
    nothing: a run that records has loaded the module already, and one that does not must end here
    at once (a second Ctrl-C may be on its way)."""
    recording = sys.modules.get("aca_gpu.recording")
    if recording is not None and (recorder := recording.active()) is not None:
        recorder.finish(_peek_command(argv), code, argv)
        recording.stop()


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)
    return EXIT_FAILURE


def _report(
    argv: list[str],
    message: str,
    exit_code: int,
    code: str | None,
    hint: str | None,
    *,
    command: str | None = None,
) -> None:
    """Through the command's own Output when it had one, else one built from the raw arguments."""
    from aca_gpu.output import Output

    output = CURRENT_OUTPUT.get()
    if output is None:
        fmt, github, _ = _peek(argv)
        output = Output(fmt, github=True if github else None, command=command or _peek_command(argv))
        CURRENT_OUTPUT.set(output)
    output.fail(message, exit_code=exit_code, code=code, hint=hint)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acagpu")
@click.option("--debug", is_flag=True, help="Show tracebacks and the SDKs' logs instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """GPU workloads on Azure Container Apps in one command.

    `acagpu up` provisions a GPU environment, probes the driver with nvidia-smi, runs the
    gpu-tester benchmark, reports driver / CUDA / GPU / timings / cost, and tears it all down.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    configure_logging(debug)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="acagpu")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
