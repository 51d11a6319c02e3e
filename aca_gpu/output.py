"""Rendering: a step log on a terminal, exactly one JSON document with `-o json`, GitHub summaries.

Workflows report progress through the small `Progress` protocol so they never know whether a
terminal, a JSON consumer or a test is listening.

Every machine-readable document goes through `Output.emit`, which stamps the envelope (`schema`,
`command`) once, applies `--query`, and renders `-o tsv`. Failures go through `Output.fail`, which
the CLI group calls for every error: one `error:` line on stderr, a JSON error document when no
document was printed yet, and a GitHub annotation. An emitted document that already carries an
`error` counts as reported, so nothing is printed twice.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

SCHEMA_VERSION = 1
FORMATS = ("table", "json", "tsv")

# what a spinner says a phase usually takes on Azure, so a long wait reads as expected, not stuck
TYPICAL_SECONDS: dict[str, str] = {
    "environment": "on Azure typically 2-5 min",
    "probe start": "image pull, on Azure typically 1-3 min",
    "tester start": "image pull, on Azure typically 1-3 min",
    "test run": "typically under 1 min",
    # `run`'s one container, from its start request to its end: the start is what is typical
    "container": "its start (placement, image pull) on Azure typically 10 s-3 min, a staged image sooner; "
    "then your command's own time",
    "teardown": "on Azure typically 5-12 min",
    "wake explorer": "a kept run's explorer is stopped between uses; on Azure typically 1-3 min",
}


# Without a terminal (CI logs, `-o json`) a step says what it waits for on stderr (a known long wait
# at once, any other once it lasts a quarter of this), then again every period, so no wait is silent
# for long (`ACAGPU_PROGRESS_S` sets the period).
PROGRESS_EVERY_S = 8.0


def progress_every_s() -> float:
    try:
        value = float(os.environ.get("ACAGPU_PROGRESS_S", "") or PROGRESS_EVERY_S)
    except ValueError:
        return PROGRESS_EVERY_S
    return value if value > 0 else PROGRESS_EVERY_S


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


class _Ticker:
    """Calls `say` after `first` seconds, then every `every` seconds, until stopped (a daemon thread)."""

    def __init__(self, say: Callable[[], None], *, first: float, every: float) -> None:
        self._stop = threading.Event()
        self._say, self._first, self._every = say, first, every
        threading.Thread(target=self._loop, name="acagpu-progress", daemon=True).start()

    def _loop(self) -> None:
        delay = self._first
        while not self._stop.wait(delay):
            try:
                self._say()
            except (OSError, ValueError):  # stderr closed under us: nobody is listening any more
                return
            delay = self._every

    def stop(self) -> None:
        self._stop.set()


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


# -- GitHub workflow commands ----------------------------------------------------------------------
def escape_data(text: str) -> str:
    """GitHub's escaping for a workflow command's message: `%`, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """GitHub's escaping for a property value (title=...): the data escapes plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, *, title: str | None = None) -> str:
    props = f" title={escape_property(title)}" if title else ""
    return f"::{level}{props}::{escape_data(message)}"


# -- tsv ---------------------------------------------------------------------------------------------
def _tsv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | int | str):
        return str(value).replace("\t", " ").replace("\n", " ")
    return json.dumps(value, default=_json_default, ensure_ascii=False)


def _tsv_row(value: object) -> str:
    if isinstance(value, Mapping):
        return "\t".join(_tsv_cell(v) for v in value.values() if not isinstance(v, Mapping | list))
    if isinstance(value, list | tuple):
        return "\t".join(_tsv_cell(v) for v in value)
    return _tsv_cell(value)


def render_tsv(value: object) -> str:
    """`az -o tsv`: a scalar as is, a list one row per item, an object its scalar values tab-separated."""
    if isinstance(value, list | tuple):
        return "\n".join(_tsv_row(item) for item in value)
    return _tsv_row(value)


def listing(doc: Any) -> Any:
    """What `-o tsv` prints of a document without --query: a listing's rows (the one list of
    objects it holds, as `az` prints a list), else the document's own scalars."""
    if isinstance(doc, Mapping):
        lists = [v for v in doc.values() if isinstance(v, list) and all(isinstance(i, Mapping) for i in v)]
        if len(lists) == 1:
            return lists[0]
    return doc


def terminal_width(stream: TextIO | None = None, default: int = 100) -> int:
    """COLUMNS wins (as in every shell tool), then the terminal's size, then `default`."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        fd = (stream or sys.stdout).fileno()
        if os.isatty(fd):
            columns_seen = os.get_terminal_size(fd).columns
            # a pty that reports 0x0 (`script` in a CI container) has no width to go by
            return columns_seen if columns_seen > 0 else default
    except (OSError, ValueError, AttributeError):
        pass
    return default


_LABEL_RE = re.compile(r"^(\s*\S[^ ]*(?: \S+)*?\s{2,})")


def wrap_lines(text: str, width: int) -> str:
    """Fold lines wider than the terminal, continuing under the value column of `label   value`
    lines (a summary's layout), so nothing runs past the edge and the labels stay readable."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        match = _LABEL_RE.match(line)
        indent = len(match.group(1)) if match and len(match.group(1)) < width // 2 else 4
        out += textwrap.wrap(
            line, width, subsequent_indent=" " * indent, break_on_hyphens=False, drop_whitespace=True
        ) or [line]
    return "\n".join(out)


def count_names(names: list[str]) -> str:
    """'4 x NVIDIA A100 80GB PCIe' for four identical GPUs; different ones listed with their counts."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())


def fit(line: str, width: int) -> str:
    """One line no wider than the terminal: cut with an ellipsis rather than wrap."""
    return line if len(line) <= width else line[: max(1, width - 1)] + "…"


class Output:
    """One renderer per command invocation."""

    def __init__(
        self,
        fmt: str = "table",
        *,
        github: bool | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        command: str = "",
        query: str | None = None,
    ) -> None:
        self.format = fmt
        self.github = github if github is not None else os.environ.get("GITHUB_ACTIONS") == "true"
        self._stdout = stdout
        self._stderr = stderr
        self.phases: dict[str, float] = {}
        self.command = command
        self.query = query
        self.emitted = False  # a document (or the human rendering) went to stdout
        self.error_reported = False  # an error line (and, in json mode, its document) went out
        self.summary_written = False
        self.last_doc: Mapping[str, Any] | None = None
        self._printed_errors: set[str] = set()
        # a terminal shows one spinner, the innermost wait's: a step inside a step pauses the outer one
        self._spinners: list[Any] = []
        self._spinners_lock = threading.Lock()

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    @property
    def is_json(self) -> bool:
        """Machine output (json, tsv, or a --query): stdout holds only the result."""
        return self.format != "table" or self.query is not None

    @property
    def interactive(self) -> bool:
        return self.stderr.isatty()

    # -- progress -----------------------------------------------------------------------------
    @contextmanager
    def step(self, name: str) -> Iterator[StepHandle]:
        handle = StepHandle(name)
        spinner = self._push_spinner(name) if self.interactive else self._still_waiting(handle)
        try:
            yield handle
        except BaseException:
            handle.status = "fail"
            raise
        finally:
            spinner.stop()
            self.phases[name] = round(handle.elapsed, 3)
            if self.format == "table" or self.interactive:
                detail = f"  {handle.detail}" if handle.detail else ""
                glyph = GLYPHS[handle.status]
                line = f"{glyph} {name:<22} {handle.elapsed:6.1f}s{detail}"
                print(fit(line, terminal_width(self.stderr)), file=self.stderr, flush=True)
            if self.interactive:
                self._pop_spinner(spinner)

    def _push_spinner(self, name: str) -> Any:
        """Two spinners drew on one line (a step inside a step): the outer one is stopped first."""
        with self._spinners_lock:
            if self._spinners:
                self._spinners[-1].stop()
            spinner = self._spinner(name)
            self._spinners.append(spinner)
            return spinner

    def _pop_spinner(self, spinner: Any) -> None:
        """The step's line is printed: the wait around it (if any) is shown again, its time running on."""
        with self._spinners_lock:
            was_shown = bool(self._spinners) and self._spinners[-1] is spinner
            if spinner in self._spinners:
                self._spinners.remove(spinner)
            if was_shown and self._spinners:
                self._spinners[-1].start()

    def _still_waiting(self, handle: StepHandle) -> _Ticker:
        """No terminal: a `... waiting for` line on stderr while a step lasts (every format)."""
        typical = TYPICAL_SECONDS.get(handle.name)
        label = f"waiting for {handle.name}" + (f" ({typical})" if typical else "")

        def say() -> None:
            detail = f": {handle.detail}" if handle.detail else ""
            line = f"... {label}{detail}, {handle.elapsed:.0f}s so far\n"
            try:
                fd = self.stderr.fileno()
            except (AttributeError, ValueError, OSError):  # a captured stream (tests): no descriptor
                print(line, end="", file=self.stderr, flush=True)
                return
            # straight to the descriptor: this thread never holds the stream's lock, so a Ctrl-C that
            # lands while the main thread writes its own lines cannot meet a lock held here
            os.write(fd, line.encode("utf-8", "replace"))

        every = progress_every_s()
        # a wait known to be long says so at once; any other step once it lasts
        first = 0.0 if handle.name in TYPICAL_SECONDS else every / 4
        return _Ticker(say, first=first, every=every)

    def _spinner(self, name: str) -> Any:
        """A transient spinner on stderr: what it waits for, its typical duration, the elapsed time."""
        from rich.console import Console
        from rich.progress import Progress as RichProgress
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        typical = TYPICAL_SECONDS.get(name)
        label = f"waiting for {name}" + (f" ({typical})" if typical else "")
        bar = RichProgress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=Console(file=self.stderr),
            transient=True,
        )
        bar.add_task(label, total=None)
        bar.start()
        return bar

    def note(self, message: str) -> None:
        if self.format == "table":
            print(f"  {message}", file=self.stderr, flush=True)

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=self.stderr, flush=True)
        if self.github:
            print(annotation("warning", message), file=self.stderr, flush=True)

    def error(self, message: str, hint: str | None = None) -> None:
        """The one `error:` line (and hint) on stderr; the same message is never printed twice."""
        if message in self._printed_errors:
            return
        self._printed_errors.add(message)
        self.error_reported = True
        print(f"error: {message}", file=self.stderr, flush=True)
        if hint:
            print(f"hint: {hint}", file=self.stderr, flush=True)
        if self.github:
            title = f"acagpu {self.command}".strip()
            print(annotation("error", message, title=title), file=self.stderr, flush=True)

    # -- results ------------------------------------------------------------------------------
    def envelope(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """`schema` and `command` first, then the document's own fields (which win if set)."""
        return {"schema": SCHEMA_VERSION, "command": self.command, **doc}

    def emit(self, doc: Mapping[str, Any], human: Callable[[TextIO], None] | str) -> None:
        """JSON mode: exactly one document on stdout. Otherwise the human rendering."""
        if not isinstance(doc, Mapping):
            raise TypeError("a command's document is a JSON object; put lists under a key")
        full = self.envelope(doc)
        self.last_doc = full
        self.emitted = True
        error = full.get("error")
        if self.is_json:
            self._print_machine(full)
        elif isinstance(human, str):
            if human:
                print(self._fold(human), file=self.stdout, flush=True)
        else:
            human(self.stdout)
        if isinstance(error, Mapping) and error.get("message"):
            self.error(str(error["message"]), error.get("hint"))

    def _fold(self, text: str) -> str:
        """On a terminal long lines fold (at COLUMNS when set); piped output keeps its lines whole,
        since scripts read them (and CI runners export COLUMNS without a terminal)."""
        try:
            tty = self.stdout.isatty()
        except (AttributeError, ValueError):
            tty = False
        return wrap_lines(text, terminal_width(self.stdout)) if tty else text

    def _print_machine(self, doc: Mapping[str, Any]) -> None:
        value: Any = doc
        if self.query is not None:
            import jmespath

            value = jmespath.search(self.query, doc)
        if self.format == "tsv":
            text = render_tsv(value if self.query is not None else listing(value))
            if text:
                print(text, file=self.stdout, flush=True)
            return
        print(dumps(value), file=self.stdout, flush=True)

    def fail(
        self,
        message: str,
        *,
        exit_code: int,
        code: str | None = None,
        hint: str | None = None,
    ) -> None:
        """Report a failure once: stderr line, annotation, and the JSON error document if none went out."""
        self.error(message, hint)
        if self.emitted:
            return
        doc = {
            "status": "error",
            "error": {"message": message, "code": code, "exit_code": exit_code, "hint": hint},
        }
        full = self.envelope(doc)
        self.last_doc = full
        self.emitted = True
        if self.is_json:
            self._print_machine(full)

    def summary(self, markdown: str) -> None:
        """Append to $GITHUB_STEP_SUMMARY when running for GitHub Actions."""
        path = os.environ.get("GITHUB_STEP_SUMMARY")
        if self.github and path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(markdown.rstrip() + "\n\n")
            self.summary_written = True

    def finish(self, exit_code: int) -> None:
        """Every command under --github leaves a job summary: its own, or this generic one."""
        if not self.github or self.summary_written or not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        doc = self.last_doc or {}
        error = doc.get("error") if isinstance(doc.get("error"), Mapping) else None
        verdict = "ok" if exit_code == 0 else f"failed (exit {exit_code})"
        lines = [f"### acagpu {self.command}: {verdict}", ""]
        if error:
            lines.append(f"> {str(error.get('message', '')).replace(chr(10), ' ')}")
            if error.get("hint"):
                lines.append(f">\n> hint: {error['hint']}")
            lines.append("")
        if doc and not error:
            body = dumps(doc)
            if len(body) > 20000:
                body = body[:20000] + "\n…"
            lines += ["<details><summary>JSON</summary>", "", "```json", body, "```", "", "</details>"]
        self.summary("\n".join(lines))
