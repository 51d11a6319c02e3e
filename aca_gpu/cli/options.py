"""Option bundles shared by commands, so every command spells -o/--query/--github the same way,
plus the one confirmation rule (az's) and the checks every free-text flag gets."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from aca_gpu.cli.current import CURRENT_OUTPUT, EXIT_INTERRUPTED
from aca_gpu.errors import AcaGpuError, BadInput
from aca_gpu.output import FORMATS, Output

F = TypeVar("F", bound=Callable[..., Any])

GUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class Declined(AcaGpuError):
    """The user said no at a confirmation prompt (or pressed Ctrl-C there): nothing was done."""

    exit_code = EXIT_INTERRUPTED


def command_name(ctx: click.Context | None) -> str:
    """'report merge' for `acagpu report merge`: the command path without the program name."""
    if ctx is None:
        return ""
    return " ".join(ctx.command_path.split()[1:])


def _query_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter("must not be empty: give a JMESPath expression, e.g. 'runs[].run_id'")
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        jmespath.compile(value)
    except JMESPathError as exc:
        first = str(exc).strip().splitlines()[0]
        raise click.BadParameter(f"not a JMESPath expression ({first})") from None
    return value


def output_options(func: F) -> F:
    """Adds -o/--output, --query and --github; the command receives a ready `output: Output`."""

    @functools.wraps(func)
    def wrapper(*args: Any, output_format: str, github: bool, query: str | None, **kwargs: Any) -> Any:
        output = Output(
            output_format,
            github=True if github else None,
            command=command_name(click.get_current_context(silent=True)),
            query=query,
        )
        CURRENT_OUTPUT.set(output)
        return func(*args, output=output, **kwargs)

    wrapped: Any = click.option(
        "--github",
        is_flag=True,
        default=False,
        help="Also write a GitHub job summary and annotations (default on when GITHUB_ACTIONS=true).",
    )(wrapper)
    wrapped = click.option(
        "--query",
        metavar="JMESPATH",
        callback=_query_option,
        help="JMESPath over the JSON document, e.g. 'runs[].run_id' (prints JSON, or tsv with -o tsv).",
    )(wrapped)
    wrapped = click.option(
        "-o",
        "--output",
        "output_format",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for people; json prints exactly one JSON document on stdout; tsv for shell scripts.",
    )(wrapped)
    return wrapped  # type: ignore[no-any-return]


def refuse_unanswerable(*, yes: bool, refusal: str) -> None:
    """The `--yes` rule's refusal, on its own: where no terminal can answer, a command whose question
    comes only after lookups (which registry, which tier?) refuses before its first step, not after."""
    if not yes and not sys.stdin.isatty():
        raise BadInput(
            f"{refusal} without --yes: stdin is not a terminal, so nobody can confirm",
            code="ConfirmationRequired",
            hint="add --yes to go ahead without a question",
        )


def confirm(question: str | Callable[[], str], *, yes: bool, refusal: str) -> None:
    """az's rule before creating billable resources or deleting: `--yes` skips the question; without
    it a terminal is asked (on stderr, whatever -o says) and anything else is refused with exit 2.

    `question` may be a function, so a lookup that the question needs (which resource group?)
    happens only once a terminal is there to answer. `refusal` names what was not done, e.g.
    "not deleting run x1". A "no" or Ctrl-C at the prompt exits 130 (Declined); nothing was done.
    """
    if yes:
        return
    refuse_unanswerable(yes=yes, refusal=refusal)
    text = question() if callable(question) else question
    try:
        agreed = click.confirm(text, default=False, err=True)
    except (click.Abort, KeyboardInterrupt, EOFError):
        click.echo("", err=True)
        agreed = False
    if not agreed:
        raise Declined(f"{refusal}: not confirmed")


# -- value checks shared by commands ----------------------------------------------------------------
def non_empty(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: an empty or whitespace-only value is an error, never "use the default"."""
    values = value if isinstance(value, tuple) else (value,)
    for item in values:
        if isinstance(item, str) and not item.strip():
            raise click.BadParameter("must not be empty or only spaces")
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, tuple):
        return tuple(v.strip() if isinstance(v, str) else v for v in value)
    return value


def non_blank(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback for secrets and user names: refuse empty or blank, keep the value exactly."""
    non_empty(ctx, param, value)
    return value


def guid(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: subscription, tenant and client ids are GUIDs (repeatable options too)."""
    value = non_empty(ctx, param, value)
    for item in value if isinstance(value, tuple) else (value,):
        if item is not None and not GUID_RE.fullmatch(item):
            raise click.BadParameter(f"{item!r}: expected a GUID like 00000000-0000-0000-0000-000000000000")
    return value


def notify_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback for --notify: the flag, else ACAGPU_NOTIFY / config `notify`; https only."""
    from aca_gpu.config import load_settings
    from aca_gpu.workflow.base.notify import check_url

    value = non_empty(ctx, param, value)
    chosen = value or load_settings().notify
    if not chosen:
        return None
    try:
        return check_url(chosen, "--notify" if value else "ACAGPU_NOTIFY / config notify")
    except BadInput as exc:
        # click names the flag already: `Invalid value for '--notify': --notify: ...` said it twice
        raise click.BadParameter(exc.message.removeprefix("--notify: ")) from None


NOTIFY_HELP = (
    "Post the outcome to this Slack or Teams incoming webhook (default: ACAGPU_NOTIFY or config "
    "`notify`). Never a token or secret in the message."
)


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a duration like 90s, 15m, 2h or 1d, checked here so the error names the flag."""
    from aca_gpu.naming import parse_duration

    value = non_empty(ctx, param, value)
    if value is None:
        return None
    try:
        parse_duration(value)
    except BadInput as exc:
        raise click.BadParameter(exc.message) from None
    return value


class Seconds(click.ParamType[float]):
    """Seconds as a bare number (`120`, `2.5`) or a duration as every other flag takes it (`90s`,
    `5m`): `exec --timeout 2s` said "'2s' is not a valid float range" where `test --timeout 2s` works."""

    name = "seconds"

    def __init__(self, least: float = 1.0) -> None:
        self.least = least

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from aca_gpu.naming import parse_duration

        if isinstance(value, int | float):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value).strip())
            except ValueError:
                try:
                    seconds = parse_duration(str(value)).total_seconds()
                except BadInput as exc:
                    self.fail(f"{exc.message}, or a number of seconds", param, ctx)
        if not seconds >= self.least:  # also refuses nan
            self.fail(f"{value!r}: at least {self.least:g} s", param, ctx)
        return seconds


DRIVER_RE = re.compile(r"^\d{3}\.\d{1,3}(\.\d{1,3})?$")


def driver_version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: an NVIDIA driver version as nvidia-smi prints it (535.104.05, 390.46)."""
    value = non_empty(ctx, param, value)
    if value is not None and not DRIVER_RE.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not an NVIDIA driver version such as 535.104.05")
    return value


def ca_bundle(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a readable PEM bundle (a garbage file fails here, not deep in a TLS handshake)."""
    from aca_gpu.config import check_ca_bundle

    value = non_empty(ctx, param, value)
    if value is None:
        return None
    try:
        return check_ca_bundle(str(value), "file")
    except BadInput as exc:
        raise click.BadParameter(exc.message) from None


def location(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a region name in ARM's form (or 'East US'); the region itself is checked later."""
    from aca_gpu.naming import validate_location

    value = non_empty(ctx, param, value)
    if value is None:
        return None
    try:
        return validate_location(value)
    except BadInput as exc:
        raise click.BadParameter(exc.message) from None


def region(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback: a region Azure has (where only a real one makes sense)."""
    from aca_gpu.naming import validate_region

    value = non_empty(ctx, param, value)
    if value is None:
        return None
    try:
        return validate_region(value)
    except BadInput as exc:
        raise click.BadParameter(exc.message) from None


def run_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from aca_gpu.naming import validate_run_id

    value = non_empty(ctx, param, value)
    if value is None:
        return None
    try:
        return validate_run_id(value)
    except BadInput as exc:
        raise click.BadParameter(exc.message) from None


# -- shell completion (docs/cli.md "Shell completion") ------------------------------------------------
def complete_gpus(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Every alias and profile type the catalog knows."""
    from aca_gpu.gpu.profiles import profile_catalog

    names = sorted({a for p in profile_catalog() for a in (*p.aliases, p.type.lower())})
    return [n for n in names if n.startswith(incomplete.lower())]


def complete_regions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from aca_gpu.naming import AZURE_REGIONS

    return sorted(r for r in AZURE_REGIONS if r.startswith(incomplete.lower()))


def complete_run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The runs in the configured subscription (asks Azure; nothing when that fails)."""
    try:
        from aca_gpu.config import load_settings
        from aca_gpu.workflow.base.context import list_runs, open_cloud

        runs = list_runs(open_cloud(load_settings()))
    except Exception:
        return []
    return sorted(r.run_id for r in runs if r.run_id.startswith(incomplete))
