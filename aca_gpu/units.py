"""Retail Prices `unitOfMeasure` strings ("1 Second", "1 GiB Second", "100 Seconds", "1M Seconds",
"1 Hour") as per-second rates: the one reading of a meter's unit, for the estimate and the bill alike."""

from __future__ import annotations

import re

_UNIT = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*([KM]?)\s*/?\s*(?:GiB[- ]?|GB[- ]?)?(second|hour)s?\b", re.IGNORECASE
)


def per_second(price: float, unit: str) -> float | None:
    """`price` per `unit` as a rate per second (per GiB-second for memory); None for a non-time unit."""
    m = _UNIT.match(unit)
    if not m:
        return None
    count = float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6}[m.group(2).upper()]
    seconds = count * (3600 if m.group(3).lower() == "hour" else 1)
    return price / seconds


def duration_text(seconds: float | None) -> str:
    """The one way acagpu prints a duration (phases, ages, expiries, cost bases): `0.4s`, `42s`,
    `12m05s`, `3h07m`, `2d04h`; `?` when unknown. Tenths only below 10 s, where warm phases live."""
    if seconds is None:
        return "?"
    value = max(0.0, float(seconds))
    if value < 10:
        return f"{value:.1f}s"
    whole = round(value)
    if whole < 120:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def usd_text(usd: float | None) -> str:
    """The one way acagpu prints a spend figure: cents from a cent up (`$0.03`, `$12.40`), four
    decimals below (`$0.0022`: a warm run's seconds are worth fractions of a cent), `<$0.0001` for
    an amount above zero that four decimals would print as `$0.0000` (a bill of milliseconds is not
    nothing), `?` unknown."""
    if usd is None:
        return "?"
    if 0 < abs(usd) < 0.00005:
        return "<$0.0001" if usd > 0 else "-<$0.0001"
    if usd != 0 and abs(usd) < 0.01:
        return f"${usd:.4f}"
    return f"${usd:.2f}"


def gpu_seconds_text(gpu_seconds: float) -> str:
    """`0.4 GPU-seconds`, `230 GPU-seconds`: tenths where a whole number would print 0 for a bill,
    and `<0.1 GPU-seconds` for a container that ran less than tenths can show (it ran: not 0)."""
    value = float(gpu_seconds)
    if 0 < value < 0.05:
        return "<0.1 GPU-seconds"
    return f"{value:.1f} GPU-seconds" if value < 10 else f"{value:.0f} GPU-seconds"
