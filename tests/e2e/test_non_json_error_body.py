"""An error answer whose body is not JSON (a gateway's HTML page) is named in one line, not pasted.

A Resource Graph query answered by a gateway page put the whole `<html>...` into the `error:` line.
The Azure layer's error translation now says which service answered what (`Resource Graph answered
501 (not JSON)`) for any error body that is not JSON.

Real processes: `acagpu emulator serve`, the chaos proxy answering the Resource Graph query with an
HTML page, and `acagpu status --all-subscriptions` as a subprocess. 501 is not retried by azure-core,
so the test does not wait out the 5xx backoff that a 503 gets (the translation is the same).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.serving import serve_behind_proxy

ACAGPU = [sys.executable, "-m", "aca_gpu"]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_an_html_error_page_is_one_clear_line(tmp_path: Path, fmt: str) -> None:
    with serve_behind_proxy(tmp_path) as (_emu, proxy, shell):
        shell = shell | {"ACAGPU_CACHE_DIR": str(tmp_path)}
        proxy.set_rules(
            {"rules": [{"fault": "status", "path": "resources$", "status": 501, "body": "html", "count": 0}]}
        )
        done = subprocess.run(
            [*ACAGPU, "status", "--all-subscriptions", "-o", fmt],
            env=shell,
            capture_output=True,
            text=True,
            timeout=120,
        )
        proxy.set_rules({"rules": []})
    said = done.stdout + done.stderr
    assert done.returncode == 7, said
    assert "<html" not in said.lower() and "Bad Gateway" not in said, said
    assert "Resource Graph answered 501 (not JSON)" in said, said
    assert "Traceback" not in said
    if fmt == "json":
        document = json.loads(done.stdout)
        assert "Resource Graph answered 501 (not JSON)" in json.dumps(document)
