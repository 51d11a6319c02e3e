"""`acagpu smi --from-file` on nvidia-smi output as people paste it: quoted in a reply (`> ` before
each line, as e-mail and GitHub quote), indented four spaces (a Markdown code block, as Stack
Overflow shows it), or between ``` fences. The output inside is unchanged, so the facts read (driver,
CUDA, GPUs, the health verdict and its exit code) are the ones the bare output gives.

Real processes: the CLI as a subprocess on files, as a user runs it. A quoted table was refused as
"no nvidia-smi banner found" (exit 2), an indented `-q` log as "-q output lists no GPU" (exit 2), and
a fenced one warned of a line reading only "```".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ACAGPU = [sys.executable, "-m", "aca_gpu"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
TABLE = "20-550.144.03-a100-sxm4-40gb.txt"
QUERY = "90-query-q-510.73.08-a100-sxm4-80gb-remap-pending-dram-correctable.txt"


def _smi(path: Path) -> tuple[int, dict[str, object], str]:
    done = subprocess.run(
        [*ACAGPU, "smi", "--from-file", str(path), "-o", "json"], capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _quoted(text: str) -> str:
    return "".join(f"> {line}" if line.strip() else ">\n" for line in text.splitlines(keepends=True))


def _indented(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in text.splitlines(keepends=True))


def _fenced(text: str) -> str:
    return "```text\n" + text.rstrip("\n") + "\n```\n"


@pytest.mark.parametrize("fixture", [TABLE, QUERY])
@pytest.mark.parametrize("wrap", [_quoted, _indented, _fenced], ids=["quoted", "indented", "fenced"])
def test_a_pasted_output_is_read_as_the_bare_one(tmp_path: Path, fixture: str, wrap: object) -> None:
    raw = (FIXTURES / fixture).read_text(encoding="utf-8")
    bare_path, pasted_path = tmp_path / "bare.txt", tmp_path / "pasted.txt"
    bare_path.write_text(raw, encoding="utf-8")
    pasted_path.write_text(wrap(raw), encoding="utf-8")  # type: ignore[operator]
    bare_rc, bare, _ = _smi(bare_path)
    rc, doc, err = _smi(pasted_path)
    assert bare["status"] != "error", bare  # the fixture itself is read
    facts = ("status", "format", "driver_version", "cuda_version", "gpu_count", "health")
    assert {k: doc[k] for k in facts} == {k: bare[k] for k in facts}, err
    assert rc == bare_rc, err
    assert "```" not in err and "```" not in json.dumps(doc["warnings"]), err
