"""Verdicts on what people paste: one `-q` section without its header, a GeForce with ECC off by
design, an uncorrectable error waiting for its row remap, and tables cut short (issue: pasted outputs).

The sections are cut from the real outputs in tests/fixtures/nvidia_smi (the header, `GPU` line and
other sections removed, as a bug report quotes them), or written in the layout a public report
printed (the R4xx `Clocks Throttle Reasons` tree that nests `HW Power Brake Slowdown` under `HW
Slowdown`, from a Dell C4130 V100-SXM2 write-up)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aca_gpu.gpu import nvidia_smi
from aca_gpu.gpu.nvidia_smi_health import DEGRADED, FAILED, HEALTHY, assess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def _body(prefix: str) -> str:
    path = next(FIXTURES.glob(prefix + "*.txt"))
    return path.read_text(encoding="utf-8").split("\n", 3)[3]


def _section(prefix: str, title: str, *, gpu: int = 0, dedent: bool = False) -> str:
    """One section of GPU `gpu` in a real `-q` output, as a report would quote it."""
    lines = _body(prefix).split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("GPU ")]
    block = lines[starts[gpu] + 1 : starts[gpu + 1] if gpu + 1 < len(starts) else len(lines)]
    at = next(i for i, line in enumerate(block) if line.strip() == title)
    indent = len(block[at]) - len(block[at].lstrip())
    end = next(
        (
            i
            for i in range(at + 1, len(block))
            if block[i].strip() and len(block[i]) - len(block[i].lstrip()) <= indent
        ),
        len(block),
    )
    out = block[at:end]
    return "\n".join(line[indent:] if dedent else line for line in out) + "\n"


def _smi(text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aca_gpu", "smi", "--from-file", "-", *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )


OLD_THROTTLE_TREE = """Clocks Throttle Reasons
    HW Slowdown                       : Active
        HW Power Brake Slowdown       : Active

Clocks
    SM                                : 382 MHz
"""


@pytest.mark.parametrize("dedent", [False, True], ids=["as-indented", "dedented"])
def test_an_ecc_errors_block_alone_is_judged(dedent: bool) -> None:
    section = _section("94-", "ECC Errors", dedent=dedent)
    assert "NVSMI LOG" not in section and "Attached GPUs" not in section
    assert assess(section).verdict == HEALTHY  # every count is 0 on that V100
    spoiled = section.replace("Total                     : 0", "Total                     : 2", 2)
    report = assess(spoiled)
    assert report.verdict == FAILED, report.summary()
    assert "ecc-uncorrectable" in {f.code for f in report.gpus[0].findings}
    parsed = nvidia_smi.parse(spoiled)
    assert parsed.format == nvidia_smi.QUERY and parsed.missing


def test_a_clock_event_reasons_block_alone_is_judged() -> None:
    section = _section("91-", "Clocks Event Reasons")
    report = assess(section)
    assert report.verdict == DEGRADED
    assert report.gpus[0].readings["clock_reasons"] == ["hw-power-brake", "hw-slowdown"]


def test_the_older_throttle_reasons_tree_is_judged() -> None:
    report = assess(OLD_THROTTLE_TREE)
    assert report.verdict == DEGRADED, report.summary()
    codes = {f.code for f in report.gpus[0].findings}
    assert {"clocks-hw-slowdown", "clocks-hw-power-brake"} <= codes


def test_a_block_that_lost_its_title_too_is_still_read() -> None:
    reasons = _section("91-", "Clocks Event Reasons", dedent=True).split("\n", 1)[1]  # title cut
    assert not reasons.startswith("Clocks")
    assert assess(reasons).verdict == DEGRADED


def test_other_text_is_still_not_a_section() -> None:
    for text in (_body("80-"), "hello : world\n", "Volatile\n", "a : b\nc : d\n"):
        assert assess(text).verdict is None, text
        assert not nvidia_smi.parse(text).ok


def test_ecc_off_on_a_geforce_is_how_it_ships() -> None:
    report = assess(_body("39-"))  # GeForce RTX 4090, ECC Mode Current: Disabled
    ecc = [f for f in report.gpus[0].findings if f.code == "ecc-off"]
    assert ecc and ecc[0].severity == "info", report.summary()
    assert not any("ECC" in problem for problem in report.problems(DEGRADED))
    h100 = _body("95-")  # NVIDIA H100 80GB HBM3, ECC on as it ships
    datacenter = re.sub(r"(ECC Mode\n\s+Current\s+: )Enabled", r"\1Disabled", h100, count=1)
    assert datacenter != h100
    assert assess(datacenter).verdict == DEGRADED


def test_an_uncorrectable_error_waiting_for_its_remap_fails() -> None:
    body = _body("90-")  # real: remap pending after correctable errors -> degraded
    assert assess(body).gpus[0].verdict == DEGRADED
    spoiled = body.replace(
        "        Correctable Error                 : 1\n        Uncorrectable Error               : 0",
        "        Correctable Error                 : 0\n        Uncorrectable Error               : 1",
        1,
    )
    assert spoiled != body
    gpu = assess(spoiled).gpus[0]
    assert gpu.verdict == FAILED
    assert any(f.code == "remap-pending-uncorrectable" and "drain" in f.message for f in gpu.findings)


def test_pasted_sections_through_the_command() -> None:
    """The CLI as a process: a section is judged (exit 5 for a failed GPU), never refused as input."""
    section = _section("94-", "ECC Errors").replace(
        "Total                     : 0", "Total                     : 2", 2
    )
    failed = _smi(section, "-o", "json")
    assert failed.returncode == 5, failed.stderr
    doc = json.loads(failed.stdout)
    assert doc["health"]["verdict"] == "failed" and doc["missing"]
    degraded = _smi(OLD_THROTTLE_TREE)
    assert degraded.returncode == 0, degraded.stderr
    assert "GPU 0 health: degraded" in degraded.stdout and "missing:" in degraded.stdout
    assert "Traceback" not in degraded.stderr + failed.stderr


def test_a_table_cut_after_its_banner_is_read() -> None:
    cut = _smi(_body("85-"), "-o", "json")
    assert cut.returncode == 0, cut.stderr
    doc = json.loads(cut.stdout)
    assert doc["status"] == "ok" and doc["driver_version"] == "470.86" and doc["cuda_version"] == "11.4"
    assert "GPU rows" in doc["missing"] and "missing GPU rows" in cut.stderr
    human = _smi(_body("85-"))
    assert human.returncode == 0 and "driver 470.86  CUDA 11.4" in human.stdout
    assert "missing: GPU rows" in human.stdout


def test_a_process_table_alone_is_read() -> None:
    alone = _smi(_body("87-"), "-o", "json")
    assert alone.returncode == 0, alone.stderr
    doc = json.loads(alone.stdout)
    assert len(doc["processes"]) == 5 and doc["driver_version"] is None
    assert any("driver and CUDA" in m for m in doc["missing"])
    human = _smi(_body("87-"))
    assert "processes: 5" in human.stdout and "missing: banner" in human.stdout
