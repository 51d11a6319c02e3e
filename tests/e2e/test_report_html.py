"""`acagpu report RUN.json --html`: the pages (a fan-out, a matrix, a serve measurement built by
`serve_document.py`) opened in a real headless Chromium (Debian's `chromium`,
which `make test-tools` installs as root): no console error, no network request (Chromium's own
net log is read), and a screenshot kept under test-artifacts/ (ACAGPU_TEST_ARTIFACTS) for a person
to look at. Skips, saying why, where Chromium cannot be had."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aca_gpu.cli import cli
from benchmarks.report_html import fanout_document
from tests.e2e.serve_document import serve_document

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("ACAGPU_TEST_ARTIFACTS", ROOT / "test-artifacts"))
# Chromium's own background traffic (time service, component updates) is not the page's: off
QUIET = ["--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter"]  # fmt: skip
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MATRIX = {
    "schema": 1, "kind": "matrix", "gpus": ["t4", "a100"],
    "images": ["nvidia/cuda:12.6.3-runtime-ubuntu22.04", "nvidia/cuda:12.4.1-runtime-ubuntu22.04"],
    "passed": 2, "failed": 1,
    "results": [
        {"image": "nvidia/cuda:12.6.3-runtime-ubuntu22.04", "gpu": "t4", "status": "pass",
         "driver_version": "550.54.15", "cuda_version": "12.6", "bf16_tflops": None},
        {"image": "nvidia/cuda:12.6.3-runtime-ubuntu22.04", "gpu": "a100", "status": "fail",
         "driver_version": "535.104.05", "cuda_version": "12.6", "reason": "<CUDA 12.6 needs driver 560>"},
        {"image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "gpu": "t4", "status": "pass",
         "driver_version": "550.54.15", "cuda_version": "12.4", "bf16_tflops": 61.2},
    ],
}  # fmt: skip


def _render(tmp_path: Path, name: str, doc: dict[str, object]) -> Path:
    source, page = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    source.write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", str(source), "--html", str(page), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["html"]["file"] == str(page)
    return page


def _open(page: Path, out: Path) -> tuple[str, list[str], list[str]]:
    """Chromium loads `page` once: (the DOM it built, console lines, URLs its network stack asked
    for). Every host name resolves to nothing, so a request that slipped through still fails fast."""
    assert CHROMIUM is not None
    netlog = out / f"{page.stem}.netlog.json"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *QUIET,
              "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={out / 'profile'}"]  # fmt: skip
    dom = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    events = _netlog(netlog)
    # the page's own requests: Chromium's background ones (updates, time) start from "not an origin"
    urls = sorted({
        str(p["url"])
        for e in events.get("events", [])
        if isinstance(p := e.get("params"), dict) and "url" in p and "initiator" in p
        and p["initiator"] != "not an origin" and not str(p["url"]).startswith(("file:", "data:"))
    })  # fmt: skip
    return dom.stdout, console, urls


def _netlog(path: Path) -> dict[str, Any]:
    """Chromium's net log: complete JSON after a clean exit, else cut after its last event."""
    text = path.read_text(encoding="utf-8").rstrip()
    try:
        found: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError:
        found = json.loads(text.rstrip(",") + "]}")
    return found


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (`make test-tools` installs Debian's chromium as root)")
    return CHROMIUM


def _shot(page: Path, out: Path, height: int) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"report-{page.stem}.png"
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *QUIET,
         f"--user-data-dir={out / 'profile'}", f"--window-size=1100,{height}", f"--screenshot={shot}",
         page.as_uri()],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
    return shot


@pytest.mark.parametrize(
    ("name", "doc", "expect"),
    [
        ("fanout-1000", fanout_document(1000), "1000 shards"),
        ("matrix", MATRIX, "CUDA 12.6 needs driver 560"),
        ("serve-measure", serve_document(), "Cut off at the ingress: cycle 3"),
    ],
)
def test_pages_open_in_chromium_without_errors_or_requests(
    chromium: str, tmp_path: Path, name: str, doc: dict[str, object], expect: str
) -> None:
    page = _render(tmp_path, name, doc)
    dom, console, urls = _open(page, tmp_path)
    assert expect in dom
    assert ("<svg" in dom) == (name != "matrix")
    assert console == [] and urls == [], (console, urls)
    _shot(page, tmp_path, {"fanout-1000": 1400, "serve-measure": 1300}.get(name, 500))


def test_the_checks_do_see_an_error_and_a_request(chromium: str, tmp_path: Path) -> None:
    """Controls: a page that fetches is caught by its CSP (a console error), and without the CSP by
    the net log; so the empty lists above mean something."""
    page = _render(tmp_path, "control", MATRIX)
    fetching = page.read_text(encoding="utf-8").replace(
        "</body>", '<img src="https://example.invalid/a.png"></body>'
    )
    blocked = tmp_path / "blocked.html"
    blocked.write_text(fetching, encoding="utf-8")
    _, console, _ = _open(blocked, tmp_path)
    assert any("Content Security Policy" in line for line in console), console
    open_page = tmp_path / "open.html"
    open_page.write_text(
        fetching.replace('http-equiv="Content-Security-Policy"', 'name="x"'), encoding="utf-8"
    )
    _, _, urls = _open(open_page, tmp_path)
    assert "https://example.invalid/a.png" in urls, urls
