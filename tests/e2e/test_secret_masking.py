"""A container that prints its own `--secret-env` value: acagpu shows `***` in its place, live and in
the `-o json` document, against `acagpu emulator serve` in a second shell (real processes). The
value still reaches the container (its length is printed beside it), and a value too short to tell
from ordinary text (under 3 characters) is left as the container printed it, as documented."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e.serving import ACAGPU, emulator_serve

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
VALUE = "hfZq8xV3kP9mN2wT7"
SCRIPT = 'echo "token is $MY_TOKEN"; echo "length ${#MY_TOKEN}"; echo "again:$MY_TOKEN." >&2'


def _run(shell: dict[str, str], value: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACAGPU, "run", "--yes", *extra, "--secret-env", "MY_TOKEN", IMAGE, "--", "sh", "-c", SCRIPT],
        env=shell | {"MY_TOKEN": value},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_printed_secret_env_value_is_masked_live_and_in_the_document(tmp_path: Path) -> None:
    with emulator_serve(tmp_path / "emu.env") as emu:
        shell = {k: v for k, v in os.environ.items() if not k.startswith("ACAGPU_")}
        shell |= emu | {"ACAGPU_POLLING_INTERVAL": "0.1", "NO_COLOR": "1"}
        live = _run(shell, VALUE)
        assert live.returncode == 0, live.stderr
        assert live.stdout.splitlines()[:2] == ["token is ***", f"length {len(VALUE)}"]
        assert "again:***." in live.stderr.splitlines()
        assert VALUE not in live.stdout + live.stderr

        doc = _run(shell, VALUE, "-o", "json")
        assert doc.returncode == 0, doc.stderr
        output = json.loads(doc.stdout)["output"]
        assert (
            output["stdout"] == f"token is ***\nlength {len(VALUE)}\n" and output["stderr"] == "again:***.\n"
        )
        assert VALUE not in doc.stdout + doc.stderr

        short = _run(shell, "ab")  # 2 characters: masking it would blank ordinary text
        assert short.returncode == 0, short.stderr
        assert short.stdout.splitlines()[:2] == ["token is ab", "length 2"]
