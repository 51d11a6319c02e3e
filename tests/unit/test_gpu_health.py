"""GPU health from real `nvidia-smi -q` outputs: every fixture's `expect.health` must be what
`assess` says, and each rule is checked on a real output with one printed value changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aca_gpu.gpu.nvidia_smi_health import DEGRADED, FAILED, HEALTHY, assess, parse_topology

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
HEALTH_CASES = [p for p in sorted(FIXTURES.glob("*.txt")) if '"health"' in p.read_text().split("\n", 2)[1]]
QUERY_CASES = [p for p in sorted(FIXTURES.glob("*.txt")) if "NVSMI LOG" in p.read_text()]


def _case(path: Path) -> tuple[dict, str]:
    _, expect, _, body = path.read_text(encoding="utf-8").split("\n", 3)
    return json.loads(expect[len("expect: ") :]), body


def _body(prefix: str) -> str:
    return _case(next(FIXTURES.glob(prefix + "*.txt")))[1]


@pytest.mark.parametrize("path", HEALTH_CASES, ids=lambda p: p.name[:2])
def test_fixture_verdicts(path: Path) -> None:
    expect, body = _case(path)
    report = assess(body)
    want = expect["health"]
    assert report.verdict == want["verdict"], report.summary()
    got = [{"verdict": g.verdict, "codes": sorted({f.code for f in g.findings})} for g in report.gpus]
    assert got == want["gpus"]


def test_the_health_fixtures_cover_every_verdict_and_driver_branch() -> None:
    verdicts = {_case(p)[0]["health"]["verdict"] for p in HEALTH_CASES}
    drivers = {_case(p)[0]["driver_version"].split(".")[0] for p in HEALTH_CASES}
    assert {HEALTHY, DEGRADED} <= verdicts
    assert {"470", "510", "535", "550", "580"} <= drivers


@pytest.mark.parametrize("path", QUERY_CASES, ids=lambda p: p.name[:2])
def test_every_query_fixture_gets_a_verdict_and_names_what_it_could_not_read(path: Path) -> None:
    report = assess(_case(path)[1])
    assert report.verdict in (HEALTHY, DEGRADED, FAILED)
    assert all(isinstance(u, str) for g in report.gpus for u in g.unread)


def test_the_evidence_quotes_the_numbers() -> None:
    report = assess(_body("90-"))
    messages = [f.message for f in report.gpus[0].findings]
    assert "177 correctable ECC error(s) since the driver loaded" in messages
    assert any("row remapping pending" in m for m in messages)
    assert report.summary().startswith("degraded: gpu0: 177 correctable")
    assert report.gpus[0].readings["remap_pending"] is True
    h100 = assess(_body("91-")).gpus[3]
    assert h100.readings["clock_reasons"] == ["hw-power-brake", "hw-slowdown"]
    assert "SM 86 of 1980 MHz" in h100.findings[0].message


# One printed value changed in a real output: the rule, not the fixture, is under test.
V100_PENDING = "        Pending Page Blacklist            : No"
GH200_FAILURE = "        Remapping Failure Occurred        : No"
GH200_DRAM = "            DRAM Uncorrectable            : 0"
H100_ACTION = "    GPU Recovery Action                                : None"
H100_WIDTH = "                Current                                : 16x"


@pytest.mark.parametrize(
    ("fixture", "old", "new", "code", "verdict"),
    [
        ("94-", V100_PENDING, V100_PENDING.replace("No", "Yes"), "page-retirement-pending", FAILED),
        ("92-", GH200_FAILURE, GH200_FAILURE.replace("No", "Yes"), "remap-failure", FAILED),
        ("92-", GH200_DRAM, GH200_DRAM.replace(": 0", ": 2"), "ecc-uncorrectable", FAILED),
        ("95-", H100_ACTION, H100_ACTION.replace("None", "Reset"), "reset-required", FAILED),
        ("95-", H100_ACTION, H100_ACTION.replace("None", "Drain and Reset"), "drain-and-reset", DEGRADED),
        ("95-", H100_WIDTH, H100_WIDTH.replace("16x", "8x"), "pcie-width", DEGRADED),
        (
            "95-",
            "    Compute Mode                                       : Default",
            "    Compute Mode                                       : Prohibited",
            "compute-prohibited",
            FAILED,
        ),
    ],
)
def test_each_rule(fixture: str, old: str, new: str, code: str, verdict: str) -> None:
    body = _body(fixture)
    assert old in body
    report = assess(body.replace(old, new, 1))
    assert report.gpus[0].verdict == verdict
    assert code in {f.code for f in report.gpus[0].findings}


def test_pre_r535_throttle_reason_names_are_read() -> None:
    """R470-R530 print `Clocks Throttle Reasons`; R535+ `Clocks Event Reasons`: both are read."""
    body = _body("91-").replace("Clocks Event Reasons", "Clocks Throttle Reasons")
    report = assess(body)
    assert report.verdict == DEGRADED
    assert report.gpus[0].readings["clock_reasons"] == ["hw-power-brake", "hw-slowdown"]


def test_a_lost_gpu_fails() -> None:
    text = (
        "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU\n"
    )
    report = assess(text)
    assert report.verdict == FAILED and report.gpus[0].findings[0].code == "gpu-lost"


def test_not_query_output_has_no_verdict() -> None:
    report = assess(_body("20-"))
    assert report.verdict is None and report.error == "not nvidia-smi -q output"
    assert report.summary().startswith("health not read")


def test_topology_matrix() -> None:
    # two GTX 1080 Ti on a desktop board, as published in
    # https://github.com/XueSongTap/XueSongTap.github.io/blob/master/_posts/2024-01-04-nvidia-smi-more.md
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      PHB     0-11            N/A\n"
        "GPU1    PHB      X      0-11            N/A\n"
    )
    assert parse_topology(text) == {"gpus": ["GPU0", "GPU1"], "links": {"GPU0-GPU1": "PHB"}}
    assert parse_topology("not a matrix") is None


def test_the_emulated_fleet_prints_health_in_each_driver_layout() -> None:
    """The simulated GPUs' -q carries every section the verdict reads, in each branch's names."""
    from aca_gpu.emulator.workloads.fleet import gpus_for
    from aca_gpu.emulator.workloads.smi_health import sicken
    from aca_gpu.emulator.workloads.smi_render import SmiHost, render_query

    for driver, reasons in (("470.256.02", "Clocks Throttle Reasons"), ("580.95.05", "Clocks Event Reasons")):
        gpus = gpus_for("Consumption-GPU-NC24-A100", "r1")
        healthy = render_query(SmiHost(driver, gpus))
        assert reasons in healthy
        report = assess(healthy)
        assert report.verdict == HEALTHY and report.gpus[0].unread == ("retired pages (N/A on this GPU)",)
        sick = assess(render_query(SmiHost(driver, sicken(gpus, "remap+throttle"))))
        assert sick.verdict == FAILED
        assert {"remap-failure", "clocks-hw-slowdown", "clocks-hw-thermal"} <= {
            f.code for f in sick.gpus[0].findings
        }
