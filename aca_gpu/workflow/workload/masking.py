"""`--secret-env` values masked in what acagpu shows of a container's output.

acagpu never prints, stores or records a secret value itself; a container that prints its own secret
puts it in its log. Each line acagpu shows of that log (live, and in the `-o json` document) has the
run's known secret values replaced with `***`, the way CI systems mask their secrets. A value of 6
characters or more is masked wherever it appears; 3 to 5 only where it stands alone (inside a word it
is not the secret); under 3 it is not masked at all, or every line would lose its digits.
What masking cannot see: a value the container transformed (encoded, reversed, split across lines),
and `acagpu logs`, which reads a run's log later and does not know the values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

MASK = "***"
MIN_ANYWHERE = 6
MIN_ALONE = 3


def masker(values: Iterable[str]) -> Callable[[str], str]:
    """A function that masks `values` in one line of output (the identity when there are none)."""
    known = sorted({v for v in values if len(v) >= MIN_ALONE}, key=len, reverse=True)
    if not known:
        return lambda text: text
    parts = [
        re.escape(v) if len(v) >= MIN_ANYWHERE else rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])"
        for v in known
    ]
    pattern = re.compile("|".join(parts))
    return lambda text: pattern.sub(MASK, text)
