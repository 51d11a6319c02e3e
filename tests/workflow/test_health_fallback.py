"""A pair's GPU health when the probe could not read `nvidia-smi -q`: the tester's own NVML readings
(tester 1.2, `devices[].telemetry.health`) judge it instead, named as the tester's in the reason and
the warnings. A probe verdict that was read stays the one that counts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from aca_gpu.config import Settings
from aca_gpu.gpu.nvidia_smi_health import HealthReport, assess
from aca_gpu.gpu.tester_result import from_document
from aca_gpu.output import NullProgress
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.engine import outcome as run_outcome
from aca_gpu.workflow.engine.outcome import PairOutcome, ProbeResult
from aca_gpu.workflow.engine.plan import UpRequest, make_plan
from aca_gpu.workflow.tester.up import up
from tests.workflow.fakecloud import PASS_DOC, FakeCloud, autospec_cloud

HEALTHY_Q = next((Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi").glob("95-*.txt"))
CLEAN = {
    "ecc_volatile_corrected": 0,
    "ecc_volatile_uncorrected": 0,
    "ecc_aggregate_corrected": 0,
    "ecc_aggregate_uncorrected": 0,
    "remapped_correctable": 0,
    "remapped_uncorrectable": 0,
    "remap_pending": False,
    "remap_failure": False,
    "retired_pages_pending": None,
    "pcie_gen": 5,
    "pcie_gen_max": 5,
    "pcie_width": 16,
    "pcie_width_max": 16,
}
UNREAD = HealthReport(None, error="nvidia-smi -q: lost the exec session")
FAILED_LINE = "gpu0: 2 uncorrectable ECC error(s) since the driver loaded"


def doc_with_health(**readings: Any) -> dict[str, Any]:
    """A passing tester result whose NVML health readings are CLEAN with `readings` changed."""
    doc = copy.deepcopy(PASS_DOC)
    doc.update(schema=3, tester_version="1.2")
    doc["devices"] = [
        {
            "index": 0,
            "name": "Tesla T4",
            "matmul": {"fp16": {"tflops": 40.0}},
            "telemetry": {"available": True, "health": {**CLEAN, **readings}},
        }
    ]
    return doc


def pair(probe: ProbeResult | None, doc: dict[str, Any] | None) -> PairOutcome:
    plan = make_plan(Settings(), UpRequest(run_id="abc123"), owner="tester@host")
    tester = run_outcome.TesterOutcome("pass", result=from_document(doc)) if doc is not None else None
    return PairOutcome(plan.pairs[0], probe=probe, tester=tester)


def test_unread_probe_health_falls_back_to_the_testers_failed_verdict() -> None:
    outcome = pair(
        ProbeResult(driver_version="535.54.03", health=UNREAD), doc_with_health(ecc_volatile_uncorrected=2)
    )
    assert outcome.status == "fail" and outcome.health_source == "tester"
    assert outcome.reason == f"GPU health (the tester's NVML readings) failed: {FAILED_LINE}"
    assert outcome.as_dict()["health_verdict"] == "failed"


def test_the_testers_degraded_verdict_warns_and_passes() -> None:
    outcome = pair(
        ProbeResult(driver_version="535.54.03", health=UNREAD), doc_with_health(ecc_volatile_corrected=3)
    )
    assert outcome.status == "pass"
    assert outcome.warnings == [
        f"{outcome.pair.label()}: GPU health (the tester's NVML readings) "
        "gpu0: 3 correctable ECC error(s) since the driver loaded"
    ]
    outcome.strict = True
    assert outcome.status == "fail" and outcome.reason.endswith("(--strict)")


def test_no_probe_at_all_also_falls_back() -> None:
    outcome = pair(None, doc_with_health(remap_failure=True))
    assert outcome.status == "fail" and outcome.health_source == "tester"
    assert "Remapping Failure Occurred: Yes" in outcome.reason


def test_a_probe_verdict_that_was_read_counts_over_the_testers() -> None:
    healthy = assess(HEALTHY_Q.read_text(encoding="utf-8").split("\n", 3)[3])
    assert healthy.verdict == "healthy"
    outcome = pair(
        ProbeResult(driver_version="580.159.04", health=healthy), doc_with_health(ecc_volatile_uncorrected=2)
    )
    assert outcome.status == "pass" and outcome.health is healthy and outcome.health_source == "nvidia-smi"
    assert outcome.warnings == []


def test_no_readings_anywhere_stays_unread() -> None:
    outcome = pair(ProbeResult(driver_version="535.54.03", health=UNREAD), dict(PASS_DOC))
    assert outcome.health is UNREAD and outcome.health_source is None
    assert outcome.status == "pass" and outcome.as_dict()["health_verdict"] is None


def _up(doc: dict[str, Any]) -> Any:
    """`up` over the fake cloud, whose `nvidia-smi -q` answers with CSV (health unread)."""
    cloud = autospec_cloud(FakeCloud(tester_doc=doc))
    plan = make_plan(Settings(), UpRequest(run_id="abc123", start_timeout="2s"), owner="tester@host")
    return up(cloud, plan, NullProgress(), Waiter(interval=0.01))


def test_up_fails_exit_5_on_the_testers_failed_health() -> None:
    outcome = _up(doc_with_health(ecc_volatile_uncorrected=2))
    doc = outcome.document()
    assert outcome.exit_code == 5, doc["error"]
    assert doc["explorer"]["health"]["verdict"] is None  # the probe read none
    assert doc["results"][0]["health_source"] == "tester"
    assert doc["error"]["message"].endswith(f"GPU health (the tester's NVML readings) failed: {FAILED_LINE}")


def test_up_passes_with_a_warning_on_the_testers_degraded_health() -> None:
    outcome = _up(doc_with_health(pcie_width=8))
    doc = outcome.document()
    assert outcome.exit_code == 0, doc["error"]
    assert doc["warnings"] and "PCIe link x8 of x16" in doc["warnings"][0]
    assert "the tester's NVML readings" in doc["warnings"][0]
