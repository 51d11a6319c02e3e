"""`acagpu report --html` of a `serve --measure` document: each cold cycle a stacked bar of its
phases (every phase a rect saying its clock), the per-phase percentiles, the warm percentiles, and
the cut-off cycle with each remedy's monthly cost."""

from __future__ import annotations

import re

from aca_gpu.workflow.report.html import kind_of, render
from tests.e2e.serve_document import serve_document


def test_a_serve_measurement_is_drawn_cycle_by_cycle_with_its_clocks_and_remedies() -> None:
    doc = serve_document()
    page = render(doc, "serve.json")
    assert kind_of(doc) == "serve" and "TODO" not in page
    # every phase of every cycle is one bar segment whose tooltip names its clock
    segments = re.findall(r"<title>([a-z ]+): [\d.]+ s \((platform|wall) clock\)</title>", page)
    cycles = doc["measurement"]["cycles"]
    assert len(segments) == sum(len(c["phases"]) for c in cycles) == 18
    assert ("image pull", "platform") in segments and ("load and first byte", "wall") in segments
    assert page.count('fill="url(#wall)"') == 2 * len(cycles)  # the wall-clock phases are hatched
    assert "ingress timeout 240 s" in page and "cycle 3 ⚠" in page
    assert "<td>image pull</td><td>platform</td><td>48.000</td><td>210.000</td>" in page
    assert "<td>full answer</td><td>0.212</td><td>0.388</td><td>0.510</td>" in page
    assert "Cut off at the ingress: cycle 3" in page
    assert "<td>--min-replicas 1</td><td>$1,138.80</td>" in page


def test_a_serve_document_without_a_measurement_shows_its_first_answer() -> None:
    doc = serve_document()
    doc["measurement"] = None
    page = render(doc, "serve.json")
    assert "First answer" in page and "Cold starts" not in page and "<svg" not in page
