"""Rendering: a step log on a terminal, exactly one JSON document with `-o json`, GitHub summaries.

Workflows report progress through the small `Progress` protocol so they never know whether a
terminal, a JSON consumer or a test is listening.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

SCHEMA_VERSION = 1


class Progress(Protocol):
    """What a workflow may say while it works."""

    def step(self, name: str) -> Any:  # a context manager yielding a StepHandle
        ...

    def note(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...


@dataclass
class StepHandle:
    name: str
    started: float = field(default_factory=time.monotonic)
    detail: str = ""
    status: str = "ok"  # ok | skip | fail

    def update(self, detail: str) -> None:
        self.detail = detail

    def skip(self, detail: str = "") -> None:
        self.status, self.detail = "skip", detail or self.detail

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


class NullProgress:
    """Progress that records phase timings and prints nothing (tests, library use)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.notes: list[str] = []

    @contextmanager
    def step(self, name: str) -> Iterator[StepHandle]:
        handle = StepHandle(name)
        try:
            yield handle
        finally:
            self.phases[name] = round(handle.elapsed, 3)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def warn(self, message: str) -> None:
        self.notes.append(f"warning: {message}")


GLYPHS = {"ok": "✓", "skip": "-", "fail": "✗"}


def _json_default(value: object) -> object:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def dumps(doc: object) -> str:
    return json.dumps(doc, indent=2, default=_json_default, ensure_ascii=False)


class Output:
    """One renderer per command invocation."""

    def __init__(
        self,
        fmt: str = "table",
        *,
        github: bool | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.format = fmt
        self.github = github if github is not None else os.environ.get("GITHUB_ACTIONS") == "true"
        self._stdout = stdout
        self._stderr = stderr
        self.phases: dict[str, float] = {}

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    @property
    def is_json(self) -> bool:
        return self.format == "json"

    @property
    def interactive(self) -> bool:
        return not self.is_json and self.stderr.isatty()

    # -- progress -----------------------------------------------------------------------------
    @contextmanager
    def step(self, name: str) -> Iterator[StepHandle]:
        handle = StepHandle(name)
        status_cm = None
        if self.interactive:
            from rich.console import Console

            status_cm = Console(file=self.stderr).status(f"{name}…")
            status_cm.__enter__()
        try:
            yield handle
        except BaseException:
            handle.status = "fail"
            raise
        finally:
            if status_cm is not None:
                status_cm.__exit__(None, None, None)
            self.phases[name] = round(handle.elapsed, 3)
            if not self.is_json:
                detail = f"  {handle.detail}" if handle.detail else ""
                glyph = GLYPHS[handle.status]
                print(f"{glyph} {name:<34} {handle.elapsed:6.1f}s{detail}", file=self.stderr, flush=True)

    def note(self, message: str) -> None:
        if not self.is_json:
            print(f"  {message}", file=self.stderr, flush=True)

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=self.stderr, flush=True)
        if self.github:
            print(f"::warning::{message}", file=self.stdout if not self.is_json else self.stderr)

    def error(self, message: str, hint: str | None = None) -> None:
        print(f"error: {message}", file=self.stderr, flush=True)
        if hint:
            print(f"hint: {hint}", file=self.stderr, flush=True)
        if self.github:
            print(f"::error::{message}", file=self.stderr, flush=True)

    # -- results ------------------------------------------------------------------------------
    def emit(self, doc: Mapping[str, Any] | list[Any], human: Callable[[TextIO], None] | str) -> None:
        """JSON mode: exactly one document on stdout. Otherwise the human rendering."""
        if self.is_json:
            print(dumps(doc), file=self.stdout, flush=True)
            return
        if isinstance(human, str):
            print(human, file=self.stdout, flush=True)
        else:
            human(self.stdout)

    def summary(self, markdown: str) -> None:
        """Append to $GITHUB_STEP_SUMMARY when running for GitHub Actions."""
        path = os.environ.get("GITHUB_STEP_SUMMARY")
        if self.github and path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(markdown.rstrip() + "\n\n")
