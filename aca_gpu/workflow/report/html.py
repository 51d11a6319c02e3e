"""`acagpu report RUN.json --html FILE`: one self-contained HTML page from any document acagpu writes.

A fan-out of 1,000 shards or a tag × GPU matrix is something people would rather look at than read,
and a CI artifact has to open anywhere, offline, years later: so the page is one file with inline
CSS and SVG, no script, no font, no image, and a Content-Security-Policy that forbids every fetch
(a browser opening it makes no request). Pure: a document in, a string out.

What each document becomes:
- a fan-out (`run --shards/--map`): every attempt of every shard on one Gantt chart (queued,
  placing + pulling, running; retried, failed and succeeded in their own colours) and the
  cumulative cost curve over the same time axis;
- a `report merge` matrix: the tag × GPU table, each cell coloured by its verdict;
- a run (`up`, `validate`, `test`, `local`, `run`): its phases as a timeline, its results;
- a serve document (`serve --measure N`): each cold cycle's phases as a stacked bar, p50/p95 per
  phase, the warm percentiles, the cut-off flags and their remedies (serve_page.py);
- any other document: its fields.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from aca_gpu.workflow.report.serve_page import serve_section

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
WIDTH = 960  # the SVGs' drawing width; they scale to the page
LABEL_W = 150
MAX_GANTT_H = 2400
CURVE_POINTS = 600
COLOURS = {
    "queued": "#e3e6ea",
    "starting": "#f2c14e",  # placing and pulling: from the start request to a running container
    "succeeded": "#3a9a5b",
    "failed": "#c8412f",
    "retried": "#e07b39",  # an attempt that failed and was run again
    "running": "#4a7fc1",
    "stopped": "#8a8f96",
}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d232a}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.meta{color:#56606b}table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #d4d9de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f7}.pass{background:#dff3e4}.fail{background:#f9dcd7}.none{color:#9aa3ab}
.refused{background:#fbe9d0}svg{max-width:100%;height:auto;display:block}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:11px;
height:11px;margin-right:4px;vertical-align:-1px}.flag{color:#c8412f}
@media print{body{margin:0;font-size:11px}h2{break-after:avoid}svg,table{break-inside:avoid}}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, (int, float)) else "–"


def kind_of(doc: Mapping[str, Any]) -> str:
    """fanout | matrix | serve | run | document: what the page draws."""
    if doc.get("mode") == "fanout":
        return "fanout"
    if doc.get("kind") == "matrix":
        return "matrix"
    if str(doc.get("command", "")).startswith("serve") or doc.get("kind") == "serve-measure":
        return "serve"
    if isinstance(doc.get("phases"), Mapping) or isinstance(doc.get("results"), list):
        return "run"
    return "document"


def render(doc: Mapping[str, Any], source: str = "") -> str:
    """The whole page for `doc` (read from `source`, named in its heading)."""
    kind = kind_of(doc)
    title = f"acagpu {doc.get('command') or doc.get('kind') or 'document'}"
    if doc.get("run_id"):
        title += f" {doc['run_id']}"
    body = {
        "fanout": _fanout,
        "matrix": _matrix,
        "serve": _serve,
        "run": _run,
        "document": _fields,
    }[kind](doc)
    status = doc.get("status")
    meta = " · ".join(
        _e(x)
        for x in (
            source,
            f"status {status}" if status else "",
            doc.get("location"),
            _cost_text(doc.get("cost")),
        )
        if x
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{_e(title)}</h1><p class="meta">{meta}</p>{body}</body></html>\n'
    )


def _cost_text(cost: Any) -> str:
    if isinstance(cost, Mapping) and isinstance(cost.get("usd_estimate"), (int, float)):
        return f"≈ ${cost['usd_estimate']:.4f} (estimate)"
    return ""


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["<table><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _legend(names: Sequence[str]) -> str:
    return (
        '<p class="legend">'
        + "".join(f'<span><i style="background:{COLOURS[n]}"></i>{_e(n)}</span>' for n in names)
        + "</p>"
    )


# ---- a run: its phases -----------------------------------------------------------------------------


def _phases_svg(phases: Mapping[str, Any], clocks: Mapping[str, Any]) -> str:
    """Each phase a bar as long as its seconds; phases nest (`probe and test` holds `test run`), so
    they are drawn one per row from zero rather than end to end."""
    items = [(str(k), float(v)) for k, v in phases.items() if isinstance(v, (int, float))]
    if not items:
        return "<p>No phases recorded.</p>"
    longest = max(v for _, v in items) or 1.0
    row, scale = 22, (WIDTH - LABEL_W - 80) / longest
    parts = [f'<svg viewBox="0 0 {WIDTH} {row * len(items) + 6}" role="img" aria-label="phases">']
    for i, (name, seconds) in enumerate(items):
        y = i * row + 3
        colour = COLOURS["starting"] if clocks.get(name) == "platform" else COLOURS["running"]
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{y + 14}" text-anchor="end" font-size="12">{_e(name)}</text>'
            f'<rect x="{LABEL_W}" y="{y}" width="{max(seconds * scale, 1):.1f}" height="{row - 6}" '
            f'fill="{colour}"><title>{_e(name)}: {seconds:.1f} s</title></rect>'
            f'<text x="{LABEL_W + seconds * scale + 4:.1f}" y="{y + 14}" font-size="12">'
            f"{seconds:.1f} s</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _run(doc: Mapping[str, Any]) -> str:
    out = ["<h2>Phases</h2>", _phases_svg(doc.get("phases") or {}, doc.get("phase_clocks") or {})]
    out.append('<p class="meta">blue: timed by acagpu (wall clock) · amber: from the platform\'s events</p>')
    results = [r for r in doc.get("results") or [] if isinstance(r, Mapping)]
    if results:
        out.append("<h2>Results</h2>")
        out.append(
            _table(
                ["image", "GPU", "status", "driver", "CUDA", "bf16 TFLOP/s", "seconds", "reason"],
                [
                    [
                        r.get("image"),
                        r.get("gpu"),
                        r.get("status"),
                        r.get("driver_version"),
                        r.get("cuda_version"),
                        _num(r.get("bf16_tflops")),
                        _num(r.get("seconds")),
                        r.get("reason") or "",
                    ]
                    for r in results
                ],
            )
        )
    error = doc.get("error")
    if isinstance(error, Mapping):
        out.append(f"<h2>Error</h2><p>{_e(error.get('message'))} (exit {_e(error.get('exit_code'))})</p>")
    return "".join(out)


# ---- a fan-out: Gantt and cumulative cost ------------------------------------------------------------


def _bars(shards: Sequence[Mapping[str, Any]]) -> list[tuple[int, float, float, float, str, str]]:
    """(row, start, running-from, end, colour, tooltip) per attempt, seconds from the first start.
    Attempts written before `started_at` existed are laid end to end within their shard."""
    origin = min(
        (
            a["started_at"]
            for s in shards
            for a in s.get("attempts") or []
            if isinstance(a.get("started_at"), (int, float))
        ),
        default=None,
    )
    bars = []
    for row, shard in enumerate(shards):
        attempts = [a for a in shard.get("attempts") or [] if isinstance(a, Mapping)]
        cursor = 0.0
        for n, a in enumerate(attempts):
            at = a.get("started_at")
            start = float(at) - origin if origin is not None and isinstance(at, (int, float)) else cursor
            seconds = float(a.get("seconds") or 0.0)
            start_s = a.get("start_s")
            running = start + float(start_s) if isinstance(start_s, (int, float)) else start + seconds
            end = start + seconds
            cursor = end
            status = str(a.get("status") or "")
            colour = (
                COLOURS["retried"]
                if status == "failed" and n < len(attempts) - 1
                else COLOURS.get(status, COLOURS["running"])
            )
            tip = (
                f"shard {shard.get('index')} attempt {a.get('attempt')}: {status}"
                f"{' (' + str(a.get('reason')) + ')' if a.get('reason') else ''}, {seconds:.1f} s"
            )
            bars.append((row, start, min(running, end), end, colour, tip))
    return bars


def _gantt_svg(shards: Sequence[Mapping[str, Any]]) -> tuple[str, float]:
    bars = _bars(shards)
    span = max((b[3] for b in bars), default=0.0) or 1.0
    n = max(len(shards), 1)
    height = min(n * 14.0, MAX_GANTT_H) if n <= 200 else min(max(n * 1.2, 240.0), MAX_GANTT_H)
    row_h = height / n
    scale = (WIDTH - LABEL_W - 10) / span
    labels = n <= 200  # a label per row only while it can be read
    parts = [
        f'<svg viewBox="0 0 {WIDTH} {height + 24:.0f}" role="img" aria-label="shards over time" '
        'shape-rendering="crispEdges">',
        f'<rect x="{LABEL_W}" y="0" width="{WIDTH - LABEL_W - 10}" height="{height:.1f}" '
        f'fill="{COLOURS["queued"]}"/>',
    ]
    gap = 0.15 * row_h if row_h >= 4 else 0.0
    for row, start, running, end, colour, tip in bars:
        y = row * row_h + gap / 2
        h = max(row_h - gap, 0.6)
        x0, x1, x2 = LABEL_W + start * scale, LABEL_W + running * scale, LABEL_W + end * scale
        if x1 > x0:
            parts.append(
                f'<rect x="{x0:.1f}" y="{y:.1f}" width="{x1 - x0:.1f}" height="{h:.2f}" '
                f'fill="{COLOURS["starting"]}"/>'
            )
        parts.append(
            f'<rect x="{x1:.1f}" y="{y:.1f}" width="{max(x2 - x1, 0.5):.1f}" height="{h:.2f}" '
            f'fill="{colour}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    if labels:
        for row, shard in enumerate(shards):
            parts.append(
                f'<text x="{LABEL_W - 6}" y="{row * row_h + row_h * 0.75:.1f}" text-anchor="end" '
                f'font-size="{min(12, row_h * 0.85):.0f}">shard {_e(shard.get("index"))}</text>'
            )
    else:
        parts.append(f'<text x="{LABEL_W - 6}" y="12" text-anchor="end" font-size="12">shard 0</text>')
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{height:.0f}" text-anchor="end" font-size="12">shard {n - 1}</text>'
        )
    parts.append(_axis(height + 16, span, scale))
    parts.append("</svg>")
    return "".join(parts), span


def _axis(y: float, span: float, scale: float) -> str:
    step = next(
        (s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200) if span / s <= 10), 14400
    )
    ticks = []
    t = 0
    while t <= span:
        ticks.append(
            f'<text x="{LABEL_W + t * scale:.1f}" y="{y:.0f}" font-size="11" text-anchor="middle">'
            f"{_duration(t)}</text>"
        )
        t += step
    return "".join(ticks)


def _duration(seconds: float) -> str:
    s = int(seconds)
    return (
        f"{s // 3600}h{s % 3600 // 60:02d}m"
        if s >= 3600
        else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")
    )


def _cost_svg(shards: Sequence[Mapping[str, Any]], span: float) -> str:
    """Cost as it accrued: each attempt's share of its shard's estimate, counted when it ended."""
    events: list[tuple[float, float]] = []
    bars = iter(_bars(shards))
    for shard in shards:
        attempts = [a for a in shard.get("attempts") or [] if isinstance(a, Mapping)]
        total_gpu = sum(float(a.get("gpu_seconds") or 0.0) for a in attempts) or 1.0
        usd = float(shard.get("usd_estimate") or 0.0)
        for a in attempts:
            bar = next(bars)
            events.append((bar[3], usd * float(a.get("gpu_seconds") or 0.0) / total_gpu))
    events.sort()
    total = sum(c for _, c in events)
    if not events or total <= 0:
        return "<p>No cost recorded.</p>"
    height, scale = 160.0, (WIDTH - LABEL_W - 10) / (span or 1.0)
    step = max(1, len(events) // CURVE_POINTS)
    points, running = [f"{LABEL_W},{height}"], 0.0
    for i, (t, c) in enumerate(events):
        running += c
        if i % step == 0 or i == len(events) - 1:
            points.append(f"{LABEL_W + t * scale:.1f},{height - running / total * (height - 8):.1f}")
    return (
        f'<svg viewBox="0 0 {WIDTH} {height + 24:.0f}" role="img" aria-label="cumulative cost">'
        f'<line x1="{LABEL_W}" y1="{height}" x2="{WIDTH - 10}" y2="{height}" stroke="#9aa3ab"/>'
        f'<polyline fill="none" stroke="{COLOURS["running"]}" stroke-width="2" points="{" ".join(points)}"/>'
        f'<text x="{LABEL_W - 6}" y="14" text-anchor="end" font-size="12">${total:.4f}</text>'
        f'<text x="{LABEL_W - 6}" y="{height:.0f}" text-anchor="end" font-size="12">$0</text>'
        f"{_axis(height + 16, span, scale)}</svg>"
    )


def _fanout(doc: Mapping[str, Any]) -> str:
    shards = sorted(
        (s for s in doc.get("shards") or [] if isinstance(s, Mapping)), key=lambda s: int(s.get("index") or 0)
    )
    summary = doc.get("summary") or {}
    counts = ", ".join(
        f"{k} {v}"
        for k, v in summary.items()
        if isinstance(v, int) and not isinstance(v, bool) and k != "shards"
    )
    gantt, span = _gantt_svg(shards)
    failed = [s for s in shards if s.get("status") not in ("succeeded", None)]
    out = [
        f"<p>{len(shards)} shards · {_e(counts)} · {_duration(span)} "
        "from the first start to the last end</p>",
        "<h2>Shards over time</h2>",
        _legend(["queued", "starting", "running", "succeeded", "retried", "failed", "stopped"]),
        '<p class="meta">starting: placing and pulling, from the start request to a running container</p>',
        gantt,
        "<h2>Cumulative cost</h2>",
        _cost_svg(shards, span),
    ]
    if failed:
        out.append("<h2>Shards that did not succeed</h2>")
        out.append(
            _table(
                ["shard", "status", "fault", "exit code", "reason", "attempts"],
                [
                    [
                        s.get("index"),
                        s.get("status"),
                        s.get("fault"),
                        s.get("exit_code"),
                        s.get("reason"),
                        len(s.get("attempts") or []),
                    ]
                    for s in failed[:200]
                ],
            )
        )
        if len(failed) > 200:
            out.append(f"<p>… and {len(failed) - 200} more (the JSON document has them all).</p>")
    out.append("<h2>Run phases</h2>")
    out.append(_phases_svg(doc.get("phases") or {}, {}))
    return "".join(out)


# ---- a matrix ------------------------------------------------------------------------------------------


def _matrix(doc: Mapping[str, Any]) -> str:
    gpus = [str(g) for g in doc.get("gpus") or []]
    cells: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pair in doc.get("results") or []:
        if isinstance(pair, Mapping):
            cells[(str(pair.get("image")), str(pair.get("gpu")))] = pair
    out = [
        f"<p>{_e(doc.get('passed'))} passed, {_e(doc.get('failed'))} failed</p>",
        "<table><tr><th>image</th>",
        *(f"<th>{_e(g)}</th>" for g in gpus),
        "</tr>",
    ]
    for image in doc.get("images") or []:
        out.append(f"<tr><th>{_e(image)}</th>")
        for gpu in gpus:
            pair = cells.get((str(image), gpu))
            if pair is None:
                out.append('<td class="none">not validated</td>')
                continue
            refused = bool(pair.get("refused"))
            verdict = "refused" if refused else ("pass" if pair.get("status") == "pass" else "fail")
            css = "refused" if refused else verdict
            detail = [
                f"driver {pair.get('driver_version') or '?'} / CUDA {pair.get('cuda_version') or '?'}",
                f"bf16 {_num(pair.get('bf16_tflops'))} TFLOP/s" if pair.get("bf16_tflops") else "",
                str(pair.get("reason") or "") if verdict != "pass" else "",
            ]
            out.append(
                f'<td class="{css}"><b>{verdict}</b><br>' + "<br>".join(_e(d) for d in detail if d) + "</td>"
            )
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


# ---- a serve measurement, anything else ---------------------------------------------------------------


def _serve(doc: Mapping[str, Any]) -> str:
    return serve_section(doc, _e, _table, WIDTH) or _fields(doc)


def _fields(doc: Mapping[str, Any]) -> str:
    rows = [[k, v] for k, v in doc.items() if not isinstance(v, (Mapping, list))]
    nested = [k for k, v in doc.items() if isinstance(v, (Mapping, list))]
    out = ["<h2>Fields</h2>", _table(["field", "value"], rows)]
    if nested:
        out.append(f'<p class="meta">also in the JSON document: {_e(", ".join(nested))}</p>')
    return "".join(out)
