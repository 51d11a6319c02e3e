"""The short Markdown verdict of any acagpu document: what a CI step summary shows first.

The GitHub action (`action.yml`) writes it to `$GITHUB_STEP_SUMMARY` through `acagpu report RUN.json
--markdown`: one table (verdict, GPU, driver, CUDA, phases, cost) that reads the same for `up`,
`validate`, `run` (a fan-out included), `serve` (its cold starts as phases, its price per hour as cost)
and `report merge`, so a reviewer needs no JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput


def read_document(path: Path) -> dict[str, Any]:
    """A JSON object acagpu wrote; anything else is bad input (exit 2), never a traceback."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not a JSON document acagpu wrote ({exc})") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: not a JSON document acagpu wrote (expected an object)")
    return doc


def _cell(value: Any) -> str:
    text = "–" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(doc: Mapping[str, Any]) -> str:
    if doc.get("kind") == "matrix":
        return "✅ pass" if not doc.get("failed") else f"❌ {doc.get('failed')} failed"
    status = str(doc.get("status") or "unknown")
    return ("✅ " if status in PASSED else "❌ ") + status


# a served app that answered (`serving`) or whose cold starts were timed (`measured`) passed
PASSED = ("ok", "pass", "succeeded", "serving", "measured")


def _serve_phases(doc: Mapping[str, Any]) -> str:
    """A serve document's cold start: the first answer, and the measured cycles' end to end."""
    parts = []
    first = doc.get("first_answer")
    if isinstance(first, Mapping) and isinstance(first.get("end_to_end_s"), (int, float)):
        parts.append(f"first answer {first['end_to_end_s']:.1f}s")
    measurement = doc.get("measurement")
    cycles = measurement.get("cycles") if isinstance(measurement, Mapping) else None
    percentiles = measurement.get("phase_percentiles") if isinstance(measurement, Mapping) else None
    whole = percentiles.get("end to end") if isinstance(percentiles, Mapping) else None
    if isinstance(whole, Mapping) and isinstance(whole.get("p50"), (int, float)):
        what = (
            "cold starts"
            if not isinstance(cycles, list)
            else f"{len(cycles)} cold start" + ("" if len(cycles) == 1 else "s")
        )
        p95 = whole.get("p95")
        tail = f", p95 {p95:.1f}s" if isinstance(p95, (int, float)) else ""
        parts.append(f"{what} p50 {whole['p50']:.1f}s{tail}")
    return ", ".join(parts)


def _price(doc: Mapping[str, Any]) -> str:
    price = doc.get("price")
    if isinstance(price, Mapping) and isinstance(price.get("usd_per_hour"), (int, float)):
        return f"${price['usd_per_hour']:.4f}/h while a replica runs"
    return ""


def _phases(doc: Mapping[str, Any]) -> str:
    phases = doc.get("phases")
    if not isinstance(phases, Mapping):
        return ""
    return ", ".join(f"{k} {v:.0f}s" for k, v in phases.items() if isinstance(v, (int, float)))


def _cost(doc: Mapping[str, Any]) -> str:
    cost = doc.get("cost")
    if isinstance(cost, Mapping) and isinstance(cost.get("usd_estimate"), (int, float)):
        return f"${cost['usd_estimate']:.4f} (estimate)"
    return ""


def markdown(doc: Mapping[str, Any], html_link: str | None = None) -> str:
    """Heading and one table; a row per result of a run, one row for a fan-out or a matrix."""
    command = doc.get("command") or doc.get("kind") or "document"
    lines = [f"### acagpu {command}: {_verdict(doc)}", ""]
    lines += ["| verdict | GPU | driver | CUDA | phases | cost |", "|---|---|---|---|---|---|"]
    results = [r for r in doc.get("results") or [] if isinstance(r, Mapping)]
    if doc.get("kind") == "matrix":
        gpus = ", ".join(map(str, doc.get("gpus") or []))
        lines.append(f"| {_verdict(doc)} | {_cell(gpus)} | – | – | {doc.get('passed', 0)} pairs passed | – |")
    elif results:
        for r in results:
            verdict = ("✅ " if r.get("status") == "pass" else "❌ ") + str(r.get("status"))
            lines.append(
                f"| {_cell(verdict)} | {_cell(r.get('gpu_name') or r.get('gpu'))} "
                f"| {_cell(r.get('driver_version'))} "
                f"| {_cell(r.get('cuda_version'))} | {_cell(_phases(doc))} | {_cell(_cost(doc))} |"
            )
    elif command == "serve":
        plan = doc.get("plan") if isinstance(doc.get("plan"), Mapping) else {}
        profile = (plan or {}).get("profile") if isinstance((plan or {}).get("profile"), Mapping) else {}
        gpu = (profile or {}).get("gpu") or (profile or {}).get("alias")
        lines.append(
            f"| {_cell(_verdict(doc))} | {_cell(gpu)} | – | – | {_cell(_serve_phases(doc))} "
            f"| {_cell(_price(doc))} |"
        )
    else:
        profile = doc.get("profile") if isinstance(doc.get("profile"), Mapping) else {}
        gpu = (profile or {}).get("gpu") or (profile or {}).get("alias")
        lines.append(
            f"| {_cell(_verdict(doc))} | {_cell(gpu)} | – | – | {_cell(_phases(doc))} | {_cell(_cost(doc))} |"
        )
    if doc.get("mode") == "fanout" and isinstance(doc.get("summary"), Mapping):
        s = doc["summary"]
        lines += ["", f"{s.get('succeeded', 0)} of {s.get('shards', 0)} shards succeeded"]
    error = doc.get("error")
    if isinstance(error, Mapping) and error.get("message"):
        lines += ["", f"**error:** {_cell(error.get('message'))}"]
    if html_link:
        lines += ["", f"[The HTML report]({html_link})"]
    return "\n".join(lines) + "\n"
