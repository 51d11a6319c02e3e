"""The serve part of `acagpu report --html`: a `serve --measure N -o json` document as a page.

What a person asks of a cold-start measurement is where the seconds went and whether the ingress
cut the first request off, so each cold cycle is one stacked bar of its phases (request to
scheduling, placement, image pull, container start, load and first byte, answer), the ingress
timeout drawn across them; then p50/p95 per phase, the warm percentiles, the flagged cycles and
what each remedy costs a month. Each phase says which clock it was read on: `platform` phases come
from the platform's events (an emulator scales them by `--time-scale`), `wall` phases from the
client's own clock (real seconds); wall phases are hatched so the two are never mistaken. A serve
document without a measurement (`serve` alone) shows its first answer and fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

PHASE_COLOURS = {  # the order `serve --measure` reads them in (workflow/serve/phases.py)
    "request to scheduling": "#8a8f96",
    "placement": "#f2c14e",
    "image pull": "#e07b39",
    "container start": "#9b6fc3",
    "load and first byte": "#4a7fc1",
    "answer": "#3a9a5b",
}
OTHER_COLOUR = "#c4cad0"
CUTOFF_COLOUR = "#c8412f"
ROW_H = 26
HATCH = (
    '<defs><pattern id="wall" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="2.2" height="6" fill="#fff" fill-opacity="0.55"/>'
    "</pattern></defs>"
)

Escape = Callable[[Any], str]
Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]


def measurement_of(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The measurement: `serve -o json`'s `measurement`, or a bare measurement document."""
    found = doc.get("measurement")
    if isinstance(found, Mapping):
        return found
    return doc if isinstance(doc.get("cycles"), list) else None


def _phases(cycle: Mapping[str, Any]) -> list[tuple[str, float, str]]:
    return [
        (str(p.get("phase")), float(p["seconds"]), str(p.get("clock") or ""))
        for p in cycle.get("phases") or []
        if isinstance(p, Mapping) and isinstance(p.get("seconds"), (int, float))
    ]


def cycles_svg(cycles: Sequence[Mapping[str, Any]], cutoff_s: float | None, e: Escape, width: int) -> str:
    """One stacked bar per cycle, phases end to end (they add up to the end-to-end time), the
    ingress timeout as a red line where the chart reaches it."""
    label_w, right = 110, 90
    span = max((sum(s for _, s, _ in _phases(c)) for c in cycles), default=0.0)
    if cutoff_s and span >= cutoff_s * 0.8:  # the line only where a cycle came near it
        span = max(span, cutoff_s)
    scale = (width - label_w - right) / (span or 1.0)
    height = ROW_H * len(cycles) + 22
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="cold cycles by phase">{HATCH}']
    for row, cycle in enumerate(cycles):
        y, x = row * ROW_H + 4, float(label_w)
        flag = " ⚠" if cycle.get("cut_off") else ""
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="12">'
            f"cycle {e(cycle.get('cycle'))}{flag}</text>"
        )
        for name, seconds, clock in _phases(cycle):
            w = seconds * scale
            colour = PHASE_COLOURS.get(name, OTHER_COLOUR)
            tip = f"<title>{e(name)}: {seconds:.3f} s ({e(clock)} clock)</title>"
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW_H - 8}" fill="{colour}">{tip}</rect>'
            )
            if clock == "wall":
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW_H - 8}" fill="url(#wall)"/>'
                )
            x += w
        total = cycle.get("end_to_end_s")
        text = f"{total:.1f} s" if isinstance(total, (int, float)) else ""
        parts.append(
            f'<text x="{x + 4:.1f}" y="{y + 14}" font-size="12">{text} · {e(cycle.get("status"))}</text>'
        )
    if cutoff_s and span >= cutoff_s:
        cx = label_w + cutoff_s * scale
        parts.append(
            f'<line x1="{cx:.1f}" y1="0" x2="{cx:.1f}" y2="{height - 18}" stroke="{CUTOFF_COLOUR}" '
            'stroke-dasharray="4 3" stroke-width="1.5"/>'
            f'<text x="{cx:.1f}" y="{height - 4}" text-anchor="middle" font-size="11" fill="{CUTOFF_COLOUR}">'
            f"ingress timeout {cutoff_s:.0f} s</text>"
        )
    else:
        parts.append(
            f'<text x="{label_w}" y="{height - 4}" font-size="11">0 s</text>'
            f'<text x="{width - right}" y="{height - 4}" font-size="11" text-anchor="end">{span:.1f} s</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(cycles: Sequence[Mapping[str, Any]], e: Escape) -> str:
    clocks: dict[str, str] = {}
    for cycle in cycles:
        for name, _, clock in _phases(cycle):
            clocks.setdefault(name, clock)
    return (
        '<p class="legend">'
        + "".join(
            f'<span><i style="background:{PHASE_COLOURS.get(n, OTHER_COLOUR)}'
            + (";outline:1px dashed #1d232a" if c == "wall" else "")
            + f'"></i>{e(n)} ({e(c)} clock)</span>'
            for n, c in clocks.items()
        )
        + "</p>"
    )


def _p(stats: Any, key: str) -> str:
    value = stats.get(key) if isinstance(stats, Mapping) else None
    return f"{value:.3f}" if isinstance(value, (int, float)) else "–"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _usd(value: Any) -> str:
    return f"${value:,.2f}" if isinstance(value, (int, float)) else "–"


def measurement_section(m: Mapping[str, Any], e: Escape, table: Table, width: int) -> str:
    cycles = [c for c in m.get("cycles") or [] if isinstance(c, Mapping)]
    cutoff = m.get("ingress_timeout_s")
    cutoff_s = float(cutoff) if isinstance(cutoff, (int, float)) else None
    flagged = [str(n) for n in m.get("flagged_cycles") or []]
    out = [
        f"<h2>Cold starts: {len(cycles)} cycle{'s' if len(cycles) != 1 else ''}</h2>",
        _legend(cycles, e),
        '<p class="meta">platform clock: from the platform\'s events, whole-second stamps (an '
        "emulator scales it by <code>--time-scale</code>); wall clock (hatched): the client's own, "
        "real seconds. ⚠: the ingress cut the first request off.</p>",
        cycles_svg(cycles, cutoff_s, e, width),
    ]
    rows = []
    for c in cycles:
        pull = _mapping(c.get("image_pull"))
        rate = pull.get("mb_per_s")
        rows.append([
            c.get("cycle"), c.get("status"), _p(c, "end_to_end_s"), _p(c, "sum_s"),
            "yes" if c.get("woke_from_zero") else "no", len(c.get("attempts") or []),
            "yes" if c.get("cut_off") else "no",
            f"{pull.get('how') or ''}{f', {rate:.0f} MB/s' if isinstance(rate, (int, float)) else ''}",
        ])  # fmt: skip
    out.append(
        table(
            [
                "cycle",
                "status",
                "end to end s",
                "phases sum s",
                "woke from zero",
                "requests",
                "cut off",
                "image pull",
            ],
            rows,
        )
    )
    stats = m.get("phase_percentiles")
    if isinstance(stats, Mapping) and stats:
        clocks = {n: c for cycle in cycles for n, _, c in _phases(cycle)}
        out.append("<h2>Per phase over the cycles</h2>")
        out.append(
            table(
                ["phase", "clock", "p50 s", "p95 s"],
                [[name, clocks.get(str(name), ""), _p(s, "p50"), _p(s, "p95")] for name, s in stats.items()],
            )
        )
    warm = m.get("warm")
    if isinstance(warm, Mapping) and warm:
        out.append(
            f"<h2>Warm requests</h2><p>{e(warm.get('requests'))} requests, {e(warm.get('concurrency'))} at "
            f"a time: {e(warm.get('ok'))} answered, {e(warm.get('failed'))} failed (wall clock)</p>"
        )
        out.append(
            table(
                ["", "p50 s", "p95 s", "p99 s"],
                [
                    [label, _p(warm.get(key), "p50"), _p(warm.get(key), "p95"), _p(warm.get(key), "p99")]
                    for label, key in (("full answer", "total_s"), ("first byte", "first_byte_s"))
                ],
            )
        )
    if flagged:
        out.append(
            f'<h2 class="flag">Cut off at the ingress: cycle {e(", ".join(flagged))}</h2>'
            f"<p>The first request was held past the ingress timeout ({e(cutoff)} s) and answered "
            "with a 5xx; a client without retries sees a failure. What avoiding it costs a month:</p>"
        )
        remedies = [r for r in m.get("remedies") or [] if isinstance(r, Mapping)]
        out.append(
            table(
                ["remedy", "USD / month", "why"],
                [[r.get("remedy"), _usd(r.get("usd_per_month")), r.get("why")] for r in remedies],
            )
        )
    elif cycles:
        out.append('<p class="meta">No cycle was cut off at the ingress.</p>')
    return "".join(out)


def serve_section(doc: Mapping[str, Any], e: Escape, table: Table, width: int) -> str:
    """The page body of a serve document: where it answers, its price, then the measurement."""
    price = _mapping(doc.get("price"))
    out = []
    if doc.get("url") or price:
        per_hour = price.get("usd_per_hour")
        out.append(
            f"<p>{e(doc.get('url') or '')}"
            + (
                f" · ${per_hour:.4f} / h while {e(price.get('while'))}"
                if isinstance(per_hour, (int, float))
                else ""
            )
            + "</p>"
        )
    first = doc.get("first_answer")
    if isinstance(first, Mapping):
        out.append("<h2>First answer</h2>")
        out.append(
            table(
                ["field", "value"], [[k, v] for k, v in first.items() if not isinstance(v, (Mapping, list))]
            )
        )
    m = measurement_of(doc)
    if m is not None:
        out.append(measurement_section(m, e, table, width))
    error = doc.get("error")
    if isinstance(error, Mapping):
        out.append(f"<h2>Error</h2><p>{e(error.get('message'))} (exit {e(error.get('exit_code'))})</p>")
    return "".join(out)
