"""The step summary's one table for a serve document: a served or measured app passed, its GPU, its
cold starts as the phases cell and its price per hour as the cost cell (a serve document has no spend
estimate). Before, a measured app read "❌ measured" with every cell empty."""

from __future__ import annotations

from typing import Any

from aca_gpu.workflow.report.summary import markdown


def _serve_doc(status: str = "measured", **extra: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "command": "serve",
        "status": status,
        "price": {"usd_per_hour": 1.5588, "while": "a replica runs"},
        "plan": {"profile": {"alias": "t4", "gpu": "Tesla T4"}},
        "first_answer": {"status": 200, "end_to_end_s": 41.27},
        "measurement": {
            "cycles": [{}, {}, {}],
            "phase_percentiles": {"end to end": {"p50": 38.04, "p95": 52.9}},
        },
        "exit_code": 0,
        "error": None,
        **extra,
    }


def _row(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith("| ") and "verdict" not in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_measured_app_passes_with_its_gpu_cold_starts_and_price() -> None:
    text = markdown(_serve_doc())
    assert text.startswith("### acagpu serve: ✅ measured")
    assert _row(text) == [
        "✅ measured",
        "Tesla T4",
        "–",
        "–",
        "first answer 41.3s, 3 cold starts p50 38.0s, p95 52.9s",
        "$1.5588/h while a replica runs",
    ]


def test_a_served_app_without_a_measurement_shows_its_first_answer() -> None:
    row = _row(markdown(_serve_doc("serving", measurement=None)))
    assert row[0] == "✅ serving" and row[4] == "first answer 41.3s", row


def test_a_serve_that_failed_says_so_and_why() -> None:
    doc = _serve_doc("error", first_answer=None, measurement=None, exit_code=4)
    doc["error"] = {"message": "the startup probe never passed"}
    text = markdown(doc)
    assert _row(text)[0] == "❌ error" and _row(text)[4] == "–"
    assert "**error:** the startup probe never passed" in text


def test_one_measured_cycle_is_said_in_the_singular() -> None:
    doc = _serve_doc()
    doc["measurement"]["cycles"] = [{}]
    assert "1 cold start p50" in _row(markdown(doc))[4]
