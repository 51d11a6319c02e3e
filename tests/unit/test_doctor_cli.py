"""`acagpu doctor`: pasted logs of real failures, the host checks on this machine, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from aca_gpu.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runtime_errors"
CASES = sorted(FIXTURES.glob("*.txt"))


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["doctor", *args], input=stdin, catch_exceptions=False)


def _case(path: Path) -> tuple[dict[str, object], str]:
    _, expect, _, body = path.read_text(encoding="utf-8").split("\n", 3)
    return json.loads(expect.removeprefix("expect: ")), body


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_from_file_recognises_each_real_log(path: Path, tmp_path: Path) -> None:
    expect, body = _case(path)
    log = tmp_path / "run.log"
    log.write_text(body, encoding="utf-8")
    result = run("--from-file", str(log), "-o", "json")
    doc = json.loads(result.stdout)
    kinds = [f["kind"] for f in doc["findings"] if f["kind"]]
    assert kinds == expect["kinds"]
    gpu_failure = bool(kinds) and expect.get("gpu", True)
    assert result.exit_code == (5 if gpu_failure else 0), result.output
    assert doc["command"] == "doctor" and doc["source"] == str(log)


def test_one_finding_per_line_with_its_fix_and_stdin() -> None:
    _, body = _case(next(p for p in CASES if p.name.startswith("12-")))
    result = run("--from-file", "-", stdin=body)
    assert result.exit_code == 5
    (line,) = result.stdout.splitlines()
    assert (
        line.startswith("✗ log: Podman has no CDI specification")
        and "fix: generate one: `sudo acagpu doctor --write-cdi`" in line
    )


def test_nvidia_smi_in_a_log_is_read_as_such(tmp_path: Path) -> None:
    _, body = _case(next(p for p in CASES if p.name.startswith("15-")))
    result = run("--from-file", "-", stdin=body)
    assert result.exit_code == 0
    assert "✓ log: nvidia-smi output: driver 535.129.03, CUDA 12.2, 1 GPU(s)" in result.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--from-file", "/nonexistent/x.log"], None, "cannot read /nonexistent/x.log"),
        (["--from-file", "-"], "  \n", "the log is empty"),
        (["--from-file", "-", "--write-cdi"], "x", "cannot be combined"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], stdin: str | None, message: str) -> None:
    result = run(*args, stdin=stdin)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_host_checks_run_here_without_a_traceback() -> None:
    result = run("-o", "json")
    assert result.exit_code in (0, 5), result.output
    doc = json.loads(result.stdout)
    checks = [f["check"] for f in doc["findings"]]
    assert checks[0] == "driver" and {"docker", "podman", "apptainer"} <= set(checks)
    assert doc["status"] == ("problems" if result.exit_code else "ok")
    for finding in doc["findings"]:
        assert finding["status"] in ("ok", "warn", "fail", "skip")
        if finding["status"] == "fail":
            assert finding["fix"], finding


def test_write_cdi_needs_a_gpu_node(tmp_path: Path) -> None:
    if list(Path("/dev").glob("nvidia[0-9]*")):
        pytest.skip("this machine has a GPU: the refusal is for machines without one")
    target = tmp_path / "nvidia.json"
    result = run("--write-cdi", "--cdi-path", str(target))
    assert result.exit_code == 2
    assert "no /dev/nvidiaN device node" in result.stderr
    assert not target.exists()


def test_random_bytes_are_refused_not_called_healthy(tmp_path: Path) -> None:
    """Random bytes decoded as text match no known failure, which read as "nothing wrong" (exit 0)."""
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(256)) * 16)
    result = CliRunner().invoke(cli, ["doctor", "--from-file", str(blob)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {blob} is not a text log"), result.stderr


def test_a_utf16_log_and_a_stray_bad_byte_are_still_logs(tmp_path: Path) -> None:
    """PowerShell's `>` writes UTF-16 with a BOM; a terminal may leave one byte that is not UTF-8."""
    line = (
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n'
    )
    for name, data in (("ps.log", line.encode("utf-16")), ("odd.log", b"\xff" + line.encode())):
        log = tmp_path / name
        log.write_bytes(data)
        result = run("--from-file", str(log), "-o", "json")
        assert result.exit_code == 5, result.output
        assert json.loads(result.stdout)["findings"][0]["kind"], result.stdout
