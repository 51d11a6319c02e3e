"""Checks every command's flags get by convention, attached once when the group loads a command.

A flag's name says what it holds: `--subscription`, `--tenant` and `--client-id` are GUIDs,
`--ttl`, `--start-timeout` and `--older-than` are durations, `-l/--location` a region name,
`--run-id` a run id, and every other free-text value must not be empty or only spaces (an empty
value never means "use the default"). Flags that contradict each other, or that only mean
something with another one, are listed in RULES by command. A command keeps any callback of its
own; these fill in where it has none, so new commands get the same contract without code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from aca_gpu.cli import options

Callback = Callable[[click.Context, click.Parameter, Any], Any]

BY_NAME: dict[str, Callback] = {
    "subscription": options.guid,
    "subscriptions": options.guid,
    "tenant": options.guid,
    "client_id": options.guid,
    "ttl": options.duration,
    "idle_ttl": options.duration,
    "start_timeout": options.duration,
    "older_than": options.duration,
    "wait_for_capacity": options.duration,
    "location": options.location,
    "run_id": options.run_id,
    "driver": options.driver_version,
    "ca_bundle": options.ca_bundle,
    "password": options.non_blank,  # a secret is checked, never trimmed
    "username": options.non_blank,
}
# where a name needs a stricter check in one command
BY_COMMAND_AND_NAME: dict[tuple[str, str], Callback] = {
    ("profiles", "location"): options.region,
    ("ci init", "location"): options.region,
    ("guard install", "location"): options.region,
    ("guard install", "every"): options.duration,
    ("test", "timeout"): options.duration,
}

COMPLETION: dict[str, Callable[[click.Context, click.Parameter, str], list[str]]] = {
    "gpu": options.complete_gpus,
    "gpus": options.complete_gpus,
    "location": options.complete_regions,
    "run_id": options.complete_run_ids,
}


@dataclass(frozen=True)
class Excludes:
    """`a` and `b` cannot be given together."""

    a: str
    b: str


@dataclass(frozen=True)
class Requires:
    """`a` only means something when `b` (or one of the names in a tuple `b`) is given too."""

    a: str
    b: str | tuple[str, ...]


# the flags that shape a fan-out's shards: one container started once has none of them
FANOUT_SHAPING = ("parallel", "retries", "retry_on_exit", "platform_retries", "logs", "output_dir")
FANOUT_MAKERS = ("shards", "map_file", "rerun_failed")


RULES: dict[str, tuple[Excludes | Requires, ...]] = {
    "up": (
        Requires("time_scale", "emulator"),
        Excludes("dry_run", "emulator"),
        Excludes("location", "regions"),
        Excludes("env_name", "regions"),
        Excludes("env_name", "location"),
        Excludes("env_name", "keep"),
        Excludes("env_name", "emulator"),
    ),
    "validate": (
        Requires("time_scale", "emulator"),
        Excludes("no_tester", "tester_image"),
        Excludes("location", "regions"),
        Excludes("env_name", "regions"),
        Excludes("env_name", "location"),
        Excludes("env_name", "emulator"),
    ),
    "smi": (
        Excludes("from_file", "run_id"),
        Excludes("from_file", "resource_group"),
        Excludes("from_file", "subscription"),
        Requires("fields", "from_file"),
    ),
    "run": (
        Requires("time_scale", "emulator"),
        Excludes("location", "regions"),
        Requires("registry_password_env", "registry_username"),
        Requires("registry_username", "registry_password_env"),
        Excludes("registry_identity", "registry_username"),
        # set but never read, each would change nothing: refused, not ignored (docs/fanout.md, queue.md)
        *(Requires(name, FANOUT_MAKERS) for name in FANOUT_SHAPING),
        Requires("max_deliveries", "workers"),
    ),
    "test": (Excludes("env_name", "resource_group"), Requires("gpu", "env_name")),
    "profiles": (Excludes("offline", "subscription"),),
    "tags": (Requires("password", "username"),),
}
# every command that selects a run
RUN_SELECTOR = Excludes("run_id", "resource_group")


class NonEmptyPath(click.Path):
    """click.Path turns '' into '.' (the current folder) before any callback sees it: refuse it first."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("must not be empty or only spaces", param, ctx)
        return super().convert(value, param, ctx)


def _is_text(param: click.Parameter) -> bool:
    text = isinstance(param.type, click.types.StringParamType | click.Path)
    return text and not getattr(param, "is_flag", False)


def harden(command: click.Command, path: str) -> click.Command:
    """Attach the conventional checks to `command` (and its subcommands), once."""
    if getattr(command, "_acagpu_hardened", False):
        return command
    command._acagpu_hardened = True  # type: ignore[attr-defined]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            harden(sub, f"{path} {name}")
        return command
    command.params.append(record_option())
    for param in command.params:
        name = param.name or ""
        if type(param.type) is click.Path:
            param.type.__class__ = NonEmptyPath
        if param.callback is None:
            if (path, name) in BY_COMMAND_AND_NAME:
                param.callback = BY_COMMAND_AND_NAME[path, name]
            elif name in BY_NAME:
                param.callback = BY_NAME[name]
            elif _is_text(param):
                param.callback = options.non_empty
        if name in COMPLETION and getattr(param, "_custom_shell_complete", None) is None:
            param._custom_shell_complete = COMPLETION[name]
    rules = RULES.get(path, ())
    names = {p.name for p in command.params}
    if {"run_id", "resource_group"} <= names:
        rules = (*rules, RUN_SELECTOR)
    if rules and command.callback is not None:
        command.callback = _with_rules(command.callback, rules)
    return command


def record_option() -> click.Option:
    """`--record DIR` (or ACAGPU_RECORD) on every command: a sanitized recording of its Azure traffic."""
    return click.Option(
        ["--record"],
        type=click.Path(file_okay=False, path_type=Path),
        envvar="ACAGPU_RECORD",
        expose_value=False,
        callback=_start_recording,
        hidden=True,  # on every command: docs/recordings.md documents it once
        help="Record every ARM and data-plane exchange, sanitized, into this folder (JSON lines).",
    )


def _start_recording(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is None or not str(value).strip():
        return
    from aca_gpu import recording

    recording.start(value)


def _with_rules(callback: Callable[..., Any], rules: tuple[Excludes | Requires, ...]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def checked(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        for rule in rules:
            if isinstance(rule, Excludes) and _given(ctx, rule.a) and _given(ctx, rule.b):
                raise click.UsageError(
                    f"{_flag(ctx, rule.a)} and {_flag(ctx, rule.b)} cannot be used together"
                )
            if isinstance(rule, Requires) and _given(ctx, rule.a):
                needed = (rule.b,) if isinstance(rule.b, str) else rule.b
                if not any(_given(ctx, name) for name in needed):
                    raise click.UsageError(f"{_flag(ctx, rule.a)} only applies with {_either(ctx, needed)}")
        return callback(*args, **kwargs)

    return checked


def given_flags(names: tuple[str, ...]) -> list[str]:
    """The flags among `names` that this invocation set (not left at their defaults), as `--flag`."""
    ctx = click.get_current_context()
    return [_flag(ctx, name) for name in names if _given(ctx, name)]


def _either(ctx: click.Context, names: tuple[str, ...]) -> str:
    flags = [_flag(ctx, name) for name in names]
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} or {flags[-1]}"


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    if source is None or source == click.core.ParameterSource.DEFAULT:
        return False
    return ctx.params.get(name) not in (None, False, ())


def _flag(ctx: click.Context, name: str) -> str:
    for param in ctx.command.params:
        if param.name == name:
            opts: list[str] = list(param.opts)
            longs = [o for o in opts if o.startswith("--")]
            return (longs or opts or [name])[0]
    return f"--{name.replace('_', '-')}"
