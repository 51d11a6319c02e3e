"""`acagpu emulator serve`: run the ARM + ACA emulator in the foreground for a second shell to use."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from aca_gpu.cli.options import driver_version, output_options
from aca_gpu.errors import BadInput
from aca_gpu.output import Output

F = TypeVar("F", bound=Callable[..., Any])


def _faults(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Parse the spec before anything starts, so a typo creates no temporary folder."""
    if value is None:
        return None
    from aca_gpu.emulator.faults import FaultSpecError, parse

    try:
        parse(value)
    except FaultSpecError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _pull_model(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from aca_gpu.emulator.pulls import PullModel

    try:
        PullModel.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def write_env_file(path: Path, text: str) -> None:
    """The file holds the emulator's bearer token: readable by its owner only (0600), even if it
    existed. It appears whole: written beside it and renamed over it, so a second shell (or a script
    waiting for the file) never reads it empty or half written."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _env_file_option(help: str) -> Callable[[F], F]:
    """`--env-file` as `serve` and `replay` both take it; only the help differs."""

    def decorate(func: F) -> F:
        return click.option(
            "--env-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=help
        )(func)

    return decorate


def _check_env_file(env_file: Path | None) -> None:
    """Refuse a folder that is not there before a server starts, not after."""
    if env_file is not None and not env_file.parent.is_dir():
        raise BadInput(f"--env-file: folder {str(env_file.parent)!r} does not exist")


def _exports(env: dict[str, str], env_file: Path | None) -> list[str]:
    """The `export` lines a second shell needs, also written to `env_file` when given."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if env_file is not None:
        write_env_file(env_file, "\n".join(lines) + "\n")
    return lines


@click.group()
def emulator() -> None:
    """The local Azure Container Apps emulator."""


@emulator.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0 = any free port).",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0, min_open=True, max=100),
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
@click.option(
    "--driver-version",
    default=None,
    callback=driver_version,
    help="Host driver version the emulated fleet reports.",
)
@click.option(
    "--faults",
    default=None,
    envvar="ACAGPU_EMULATOR_FAULTS",
    callback=_faults,
    help="Fault spec, e.g. '429:count=2'.",
)
@click.option(
    "--registered/--unregistered",
    default=False,
    show_default=True,
    help="Start with Microsoft.App registered (a fresh subscription is not).",
)
@click.option(
    "--durations",
    type=click.Choice(["recorded", "aca-2026"]),
    default="recorded",
    show_default=True,
    help="Duration set: the recorded traffic, or the newer 2026 figures (GPU profile ~490 s, app "
    "create tails, pulls by image size and registry distance).",
)
@click.option(
    "--pulls",
    "pull_model",
    default="",
    callback=_pull_model,
    help="Pull model parameters, UNCONFIRMED on ACA and off by default: 'cache=on' (a node keeps "
    "pulled images across job executions), 'streaming=on' (converted ACR images stream by tag).",
)
@click.option(
    "--subscriptions",
    "subscription_count",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="How many subscriptions to emulate (one tenant; Resource Graph sees them all).",
)
@click.option(
    "--storage",
    type=click.Choice(["none", "azurite"]),
    default="none",
    show_default=True,
    help="Serve the storage accounts' queues through Azurite (Microsoft's Storage emulator; "
    "`make test-tools` installs it): needed by `acagpu run --workers`.",
)
@_env_file_option("Also write the ACAGPU_* variables to this file (mode 0600: it holds the token).")
@output_options
def serve(
    output: Output,
    port: int,
    time_scale: float,
    workload: str,
    driver_version: str | None,
    faults: str | None,
    registered: bool,
    durations: str,
    pull_model: str,
    subscription_count: int,
    storage: str,
    env_file: Path | None,
) -> None:
    """Serve until Ctrl-C; print the `export ACAGPU_...` lines a second shell needs."""
    from aca_gpu.emulator.azurite import AzuriteMissing
    from aca_gpu.emulator.server import EmulatorServer

    _check_env_file(env_file)
    if workload == "host" and shutil.which("nvidia-smi") is None:  # else only the first `up` would say
        raise BadInput(
            "--workload host runs this machine's nvidia-smi, which is not on PATH",
            hint="install the NVIDIA driver here, or use --workload simulated",
        )
    server = EmulatorServer(
        port=port,
        time_scale=time_scale,
        workload=workload,
        driver_version=driver_version,
        faults=faults,
        registered=registered,
        durations=durations,
        pulls=pull_model,
        subscriptions=subscription_count,
        storage=storage,
    )
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()  # removes the temporary CA folder
        cause = exc.__cause__
        if isinstance(cause, AzuriteMissing):
            raise BadInput(f"--storage azurite: {cause}") from None
        if isinstance(cause, OSError):
            raise BadInput(f"--port {port}: cannot listen on 127.0.0.1 ({cause.strerror or cause})") from None
        raise
    try:
        env = server.client_env()
        lines = _exports(env, env_file)
        doc: dict[str, Any] = {"status": "serving", "endpoint": server.endpoint, "env": env}
        if len(server.subscriptions) > 1:
            doc["subscriptions"] = server.subscriptions
            lines.append(f"# emulated subscriptions: {' '.join(server.subscriptions)}")
        output.emit(doc, "\n".join(lines))
        click.echo(f"# acagpu emulator listening on {server.endpoint} (Ctrl-C to stop)", err=True)
    except BaseException:
        server.stop()
        raise
    server.serve_forever()


@emulator.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port on 127.0.0.1."
)
@_env_file_option("Also write the ACAGPU_* variables to this file (mode 0600).")
@output_options
def replay(output: Output, folder: Path, port: int, env_file: Path | None) -> None:
    """Serve a `--record` folder as a strict fake Azure until Ctrl-C; exit 1 if the replay diverged."""
    from aca_gpu.emulator.replay import STATUS_PATH, ReplayServer
    from aca_gpu.recording import RECORDING_FILE

    if not (folder / RECORDING_FILE).is_file():
        raise BadInput(f"{folder} holds no {RECORDING_FILE}", hint="record one with --record DIR")
    _refuse_queue_run(folder)
    _check_env_file(env_file)
    server = ReplayServer(folder, port=port)
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        raise BadInput(f"--port {port}: cannot listen on 127.0.0.1 ({exc.__cause__ or exc})") from None
    try:
        env = server.client_env()
        lines = _exports(env, env_file)
        doc: dict[str, Any] = {"status": "serving", "endpoint": server.endpoint, "env": env}
        output.emit(doc, "\n".join(lines))
        verdict = f"{server.endpoint}{STATUS_PATH}"
        click.echo(f"# replaying {folder} on {server.endpoint} (verdict: {verdict}; Ctrl-C stops)", err=True)
        _wait_for_interrupt()
    finally:
        server.stop()
    report = server.script.report()
    click.echo(f"# replay verdict: {json.dumps(report)}", err=True)
    if not report["ok"]:
        raise SystemExit(1)


def _refuse_queue_run(folder: Path) -> None:
    """A queue run's recording (`run --workers`) is evidence, not a script: what its client reads
    depends on when its workers' results came, and its role assignments are named after a principal
    made anew each run, so a replay could only diverge. Refused before anything listens (exit 2)."""
    from aca_gpu.recording import RECORDING_FILE

    def event_job(line: str) -> bool:  # the queue run's Event job, as its PUT was recorded
        try:
            exchange = json.loads(line)
        except ValueError:
            return False
        body = json.dumps(exchange.get("request_body") or "")
        return (
            exchange.get("method") == "PUT"
            and "/providers/Microsoft.App/jobs/" in str(exchange.get("uri") or "")
            and "eventTriggerConfig" in body
        )

    with (folder / RECORDING_FILE).open(encoding="utf-8") as lines:
        queue_run = any(event_job(line) for line in lines if "eventTriggerConfig" in line)
    if queue_run:
        raise BadInput(
            f"{folder} records a queue run (run --workers): its reads follow its workers' timing and its "
            "role assignments a principal made anew, so it cannot be replayed; keep it as evidence",
            hint="docs/recordings.md, 'Queue runs'",
        )


def _wait_for_interrupt() -> None:
    import signal
    import threading

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
