"""Cron expressions as Container Apps schedule triggers take them: five fields, UTC.

`minute hour day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a step `*/n` or
`a-b/n`, or a comma list of those. When both day fields are restricted a day matches either (the
classic cron rule). Pure: the emulator's ticker asks `matches` for each emulated minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)


class CronError(ValueError):
    """The expression does not parse."""


@dataclass(frozen=True)
class Cron:
    text: str
    fields: tuple[frozenset[int], ...]
    dom_any: bool
    dow_any: bool

    def matches(self, moment: datetime) -> bool:
        minute, hour, dom, month, dow = self.fields
        if moment.minute not in minute or moment.hour not in hour or moment.month not in month:
            return False
        weekday = (moment.weekday() + 1) % 7  # cron: Sunday is 0 (and 7)
        day_ok = moment.day in dom
        week_ok = weekday in dow or (weekday == 0 and 7 in dow)
        if self.dom_any or self.dow_any:
            return day_ok and week_ok
        return day_ok or week_ok


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if body == "*":
                start, end = low, high
            elif "-" in body:
                a, b = body.split("-", 1)
                start, end = int(a), int(b)
            else:
                start = end = int(body)
                if step_text:
                    end = high
        except ValueError:
            raise CronError(f"invalid {name} {part!r}") from None
        if step < 1 or not (low <= start <= end <= high):
            raise CronError(f"{name} {part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse(text: str) -> Cron:
    parts = text.split()
    if len(parts) != 5:
        raise CronError(f"expected 5 fields (minute hour day month weekday), got {len(parts)}")
    fields = tuple(_field(p, name, low, high) for p, (name, low, high) in zip(parts, _FIELDS, strict=True))
    return Cron(" ".join(parts), fields, parts[2] == "*", parts[4] == "*")
