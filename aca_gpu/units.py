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
