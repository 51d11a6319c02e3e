"""`nvidia-smi -q -x` gets the verdict `-q` gets: the real XML outputs in tests/fixtures/nvidia_smi
(96: R515 DTD v11 T4, 97: R535 DTD v12 A100) with one printed value changed per rule, in the
element names those drivers print (the module docstring of `nvidia_smi_health_xml` lists them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aca_gpu.gpu.nvidia_smi_health import DEGRADED, FAILED, HEALTHY, assess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def _body(prefix: str) -> str:
    return next(FIXTURES.glob(prefix + "*.txt")).read_text(encoding="utf-8").split("\n", 3)[3]


REMAP = (
    "<remapped_rows>N/A</remapped_rows>",
    "<remapped_rows><remapped_row_corr>0</remapped_row_corr><remapped_row_unc>1</remapped_row_unc>"
    "<remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure>"
    "</remapped_rows>",
)


@pytest.mark.parametrize(
    ("fixture", "old", "new", "code", "verdict"),
    [
        (
            "97-",
            "<volatile>\n                <sram_correctable>0</sram_correctable>\n"
            "                <sram_uncorrectable>0</sram_uncorrectable>\n"
            "                <dram_correctable>0</dram_correctable>\n"
            "                <dram_uncorrectable>0</dram_uncorrectable>",
            "<volatile>\n<sram_correctable>0</sram_correctable><sram_uncorrectable>0</sram_uncorrectable>"
            "<dram_correctable>0</dram_correctable><dram_uncorrectable>2</dram_uncorrectable>",
            "ecc-uncorrectable",
            FAILED,
        ),
        (
            "97-",
            "<dram_correctable>0</dram_correctable>",
            "<dram_correctable>5</dram_correctable>",
            "ecc-correctable",
            DEGRADED,
        ),
        ("97-", *REMAP, "remap-pending-uncorrectable", FAILED),
        (
            "97-",
            "<reset_required>No</reset_required>",
            "<reset_required>Yes</reset_required>",
            "reset-required",
            FAILED,
        ),
        (
            "97-",
            "<current_ecc>Enabled</current_ecc>",
            "<current_ecc>Disabled</current_ecc>",
            "ecc-off",
            DEGRADED,
        ),
        (
            "97-",
            "<clocks_event_reason_hw_power_brake_slowdown>Not Active",
            "<clocks_event_reason_hw_power_brake_slowdown>Active",
            "clocks-hw-power-brake",
            DEGRADED,
        ),
        ("97-", "<compute_mode>Default", "<compute_mode>Prohibited", "compute-prohibited", FAILED),
        ("96-", "<pending_blacklist>No", "<pending_blacklist>Yes", "page-retirement-pending", FAILED),
        (
            "96-",
            "<clocks_throttle_reason_hw_thermal_slowdown>Not Active",
            "<clocks_throttle_reason_hw_thermal_slowdown>Active",
            "clocks-hw-thermal",
            DEGRADED,
        ),
    ],
)
def test_each_rule_reads_the_xml(fixture: str, old: str, new: str, code: str, verdict: str) -> None:
    body = _body(fixture)
    assert old in body, old
    report = assess(body.replace(old, new, 1))
    assert report.verdict == verdict, report.summary()
    assert code in {f.code for f in report.gpus[0].findings}


def test_every_layout_of_the_dtd_is_read() -> None:
    """R550+ splits SRAM uncorrectable (parity / SEC-DED) and R580 prints a recovery action; pre-R510
    drivers nest single_bit / double_bit trees with a total."""
    a100 = _body("97-")
    head, ecc = a100.split("<ecc_errors>", 1)  # (MIG devices carry an sram_uncorrectable of their own)
    r550 = (
        head
        + "<ecc_errors>"
        + ecc.replace(
            "<sram_uncorrectable>0</sram_uncorrectable>",
            "<sram_uncorrectable_parity>0</sram_uncorrectable_parity>"
            "<sram_uncorrectable_secded>3</sram_uncorrectable_secded>",
            1,
        ).replace("</aggregate>", "<sram_threshold_exceeded>Yes</sram_threshold_exceeded></aggregate>", 1)
    )
    codes = {f.code for f in assess(r550).gpus[0].findings}
    assert {"ecc-uncorrectable", "sram-threshold"} <= codes
    r580 = a100.replace("<ibmnpu>", "<gpu_recovery_action>Drain and Reset</gpu_recovery_action><ibmnpu>", 1)
    assert "drain-and-reset" in {f.code for f in assess(r580).gpus[0].findings}
    old = _body("96-").replace(
        _body("96-")[_body("96-").index("<ecc_errors>") : _body("96-").index("</ecc_errors>")],
        "<ecc_errors><volatile><single_bit><device_memory>4</device_memory><total>4</total></single_bit>"
        "<double_bit><device_memory>0</device_memory><total>0</total></double_bit></volatile>",
    )
    report = assess(old)
    assert report.verdict == DEGRADED
    assert report.gpus[0].readings["ecc_volatile_corrected"] == 4
    assert "4 correctable ECC error(s) since the driver loaded" in [
        f.message for f in report.gpus[0].findings
    ]


def test_the_xml_readings_are_those_of_q() -> None:
    t4 = assess(_body("96-")).gpus[0]
    assert t4.bus_id == "00000000:00:1E.0" and t4.name == "Tesla T4"
    assert (t4.readings["pcie_width"], t4.readings["pcie_width_max"]) == (8, 16)
    assert t4.readings["retired_pages_sbe"] == 0 and t4.readings["ecc_mode"] == "Enabled"
    assert "PCIe link x8 of x16: trained below its width" in [f.message for f in t4.findings]
    a100 = assess(_body("97-")).gpus[0]
    assert a100.verdict == HEALTHY and a100.readings["sm_clock_max_mhz"] == 1410
    assert a100.readings["reset_required"] is False and a100.readings["ecc_volatile_uncorrected"] == 0
    assert "clock event reasons" not in a100.unread and "pcie link" not in a100.unread


@pytest.mark.parametrize(
    "text",
    ["<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>", "<html><body/></html>", "<a>"],
)
def test_xml_without_a_gpu_has_no_verdict(text: str) -> None:
    report = assess(text)
    assert report.verdict is None and report.error


def test_smi_from_file_judges_a_pasted_xml() -> None:
    failing = _body("97-").replace(*REMAP, 1)
    done = subprocess.run(
        [sys.executable, "-m", "aca_gpu", "smi", "--from-file", "-", "-o", "json"],
        input=failing,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5, done.stderr
    doc = json.loads(done.stdout)
    assert doc["health"]["verdict"] == FAILED and doc["error"]["code"] == "GpuUnhealthy"
    human = subprocess.run(
        [sys.executable, "-m", "aca_gpu", "smi", "--from-file", "-"],
        input=_body("96-"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0, human.stderr
    assert "GPU 0 health: degraded" in human.stdout and "PCIe link x8 of x16" in human.stdout
