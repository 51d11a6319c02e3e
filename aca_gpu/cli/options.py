"""Option bundles shared by commands, so every command spells -o/--github the same way."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from aca_gpu.output import Output

F = TypeVar("F", bound=Callable[..., Any])


def output_options(func: F) -> F:
    """Adds -o/--output and --github; the command receives a ready `output: Output`."""

    @functools.wraps(func)
    def wrapper(*args: Any, output_format: str, github: bool, **kwargs: Any) -> Any:
        return func(*args, output=Output(output_format, github=True if github else None), **kwargs)

    wrapped: Any = click.option(
        "--github",
        is_flag=True,
        default=False,
        help="Also write a GitHub job summary and annotations (default on when GITHUB_ACTIONS=true).",
    )(wrapper)
    wrapped = click.option(
        "-o",
        "--output",
        "output_format",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people; json prints exactly one JSON document on stdout.",
    )(wrapped)
    return wrapped  # type: ignore[no-any-return]
