"""Every shell example on the front page (and in each docs page that opts in) runs as pasted.

A page's ```sh blocks are its examples. The block marked `<!-- example: serve -->` is the first shell:
it is started as written (`acagpu emulator serve ...`) and left running. Every other block is the
second shell: it runs as written in `bash -e -o pipefail`, with the variables the server's env file
holds (as after `source` of it) and no terminal on stdin, and must exit 0. The front page is run
the way a newcomer pastes it: every block in order, in one folder, against one server, so one
section's leftovers (a warm environment still being deleted, say) meet the next section. A docs
page's blocks each get an empty folder and a server of their own (`acagpu emulator serve` at a faster
time scale where the page shows no serve line). A block that cannot run against the emulator says
why in `<!-- not run: REASON -->` on the line before it.

The one change made to what is pasted: the env file's fixed path (`/tmp/acagpu.env`) becomes a path of
the test's own, so tests running side by side do not share one. `.venv` in the folder is the venv the
suite runs in, as it is in a checkout after `make demo`.

A docs page opts in with the line `<!-- examples: run by tests/e2e/test_doc_examples.py -->`; pages
that do not are left alone, so a new page never breaks this test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.serving import read_env

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OPT_IN = "<!-- examples: run by tests/e2e/test_doc_examples.py -->"
ENV_FILE = "/tmp/acagpu.env"
# a page that shows no serve line runs against a faster emulator, polled faster: what its examples
# print and exit with is the same at any speed (the front page runs as pasted, at the defaults)
DEFAULT_SERVE = f"acagpu emulator serve --time-scale 0.002 --env-file {ENV_FILE}"
FASTER = {"ACAGPU_POLLING_INTERVAL": "0.1"}
# the front page's shell polls every 0.5 s instead of 5: the same answers, sooner (the pasted text
# and the server are as written)
POLL_OFTEN = {"ACAGPU_POLLING_INTERVAL": "0.5"}
MARKER = re.compile(r"^<!-- (not run|example): ?(.*?) -->$")
BLOCK_LIMIT_S = 300


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # of the opening fence
    text: str
    marker: tuple[str, str] | None  # ("not run", why) | ("example", "serve") | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The page's ```sh blocks, each with the marker on the line before its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            end = lines.index("```", i + 1)
            before = lines[i - 1].strip() if i else ""
            mark = MARKER.match(before)
            found.append(
                Example(page, i + 1, "\n".join(lines[i + 1 : end]), mark.groups() if mark else None)  # type: ignore[arg-type]
            )
            i = end
        i += 1
    return found


def pages() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [README, *(p for p in docs if OPT_IN in p.read_text(encoding="utf-8"))]


def _second_shell(page: Path) -> list[Example]:
    return [e for e in examples(page) if e.marker is None]


def _docs_examples() -> list[Example]:
    return [e for p in pages() if p != README for e in _second_shell(p)]


def _serve_line(page: Path) -> str:
    served = [e.text for e in examples(page) if e.marker == ("example", "serve")]
    assert len(served) <= 1, f"{page.name}: more than one serve block"
    return served[0] if served else DEFAULT_SERVE


def _shell_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGPU_", "GITHUB_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder like a checkout's root after `make demo`: `.venv` is this suite's venv."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    return work


@contextmanager
def _serving(line: str, folder: Path, env_file: Path) -> Iterator[dict[str, str]]:
    """The page's first shell, as written (its env file moved to `env_file`), until the test ends."""
    command = line.replace(ENV_FILE, str(env_file))
    log = (folder.parent / "serve.log").open("w", encoding="utf-8")
    server = subprocess.Popen(
        ["bash", "-c", command],
        cwd=folder,
        env=_shell_env(folder.parent),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not env_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert env_file.exists(), (folder.parent / "serve.log").read_text(encoding="utf-8")
        yield read_env(env_file)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _paste(example: Example, folder: Path, env_file: Path, served: dict[str, str]) -> None:
    """One block in the second shell; it must exit 0 and print no traceback."""
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", example.text.replace(ENV_FILE, str(env_file))],
        cwd=folder,
        env=_shell_env(folder.parent) | served,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_LIMIT_S,
    )
    said = f"{example.name} exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    assert "Traceback" not in done.stderr, said


@pytest.mark.slow(112)
def test_front_page_runs_top_to_bottom(folder: Path) -> None:
    env_file = folder.parent / "acagpu.env"
    with _serving(_serve_line(README), folder, env_file) as served:
        for example in _second_shell(README):
            _paste(example, folder, env_file, served | POLL_OFTEN)


@pytest.mark.parametrize("example", _docs_examples(), ids=lambda e: e.name)
def test_example_runs_as_pasted(example: Example, folder: Path) -> None:
    env_file = folder.parent / "acagpu.env"
    line = _serve_line(example.page)
    with _serving(line, folder, env_file) as served:
        _paste(example, folder, env_file, served | (FASTER if line == DEFAULT_SERVE else {}))


def test_every_block_is_run_or_says_why() -> None:
    """A marker is one of the two kinds, a `not run` one gives its reason, and the front page has
    its one serve block and examples after it."""
    readme = examples(README)
    assert [e for e in readme if e.marker == ("example", "serve")], "README has no serve block"
    for page in pages():
        for example in examples(page):
            if example.marker and example.marker[0] == "not run":
                assert example.marker[1].strip(), f"{example.name}: not run, but no reason"
            elif example.marker:
                assert example.marker == ("example", "serve"), example.name
    assert len([e for e in readme if e.marker is None]) >= 6


def test_the_first_screen_shows_how_to_try_without_azure() -> None:
    """A newcomer meets the emulator, both shells of it, within the first screen (50 lines)."""
    head = "\n".join(README.read_text(encoding="utf-8").splitlines()[:50])
    assert "acagpu emulator serve" in head and f"source {ENV_FILE}" in head and "make demo" in head


def test_markers_parse(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "intro\n<!-- not run: needs Azure -->\n```sh\nacagpu up\n```\n\n```sh\nacagpu status\n```\n"
        "```json\n{}\n```\n",
        encoding="utf-8",
    )
    got = examples(page)
    assert [(e.line, e.text, e.marker) for e in got] == [
        (3, "acagpu up", ("not run", "needs Azure")),
        (7, "acagpu status", None),
    ]
