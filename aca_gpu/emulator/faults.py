"""Faults on demand, from `/_emulator/faults` or `ACAGPU_EMULATOR_FAULTS`.

Spec: `;`-separated entries `kind[:key=value,...]`, plus `seed=N`. Each fault fires with `rate=`
(probability per opportunity, drawn from one seeded RNG) or for the first `count=` opportunities;
with neither it always fires. Kinds:

- `429` (`retry_after=` seconds, default 1) and `5xx` (`status=` 500|502|503, default 500): ARM calls
  fail before reaching the provider; `match=` limits them to paths containing a substring,
  `method=` to one HTTP method.
- `ws_drop` (`after=` stdout/stderr frames, default 0): the exec websocket closes abruptly.
- `log_drop` (`after=` lines, default 1): the log stream ends early.
- `stuck`: a new replica stays in AssigningReplica.
- `quota`: environment or app creation fails with "Maximum Allowed Cores exceeded".
- `slow_delete` (`factor=`, default 3): environment deletes take longer.
- `tty_echo`: exec sessions echo stdin and use CRLF, as a TTY would.

Example: `429:count=2,retry_after=1;ws_drop:rate=0.5;seed=7`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = ("429", "5xx", "ws_drop", "log_drop", "stuck", "quota", "slow_delete", "tty_echo")


class FaultSpecError(ValueError):
    """The fault spec does not parse."""


@dataclass
class Fault:
    kind: str
    rate: float | None = None
    count: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    fired: int = 0

    def param(self, key: str, default: str) -> str:
        return self.params.get(key, default)


def parse(spec: str) -> tuple[list[Fault], int]:
    faults: list[Fault] = []
    seed = 0
    for raw in spec.replace("\n", ";").split(";"):
        entry = raw.strip()
        if not entry:
            continue
        if entry.startswith("seed="):
            try:
                seed = int(entry[5:])
            except ValueError as exc:
                raise FaultSpecError(f"bad seed in {entry!r}") from exc
            continue
        kind, _, rest = entry.partition(":")
        kind = kind.strip()
        if kind not in KINDS:
            raise FaultSpecError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
        fault = Fault(kind)
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise FaultSpecError(f"expected key=value in {entry!r}")
            try:
                if key == "rate":
                    fault.rate = float(value)
                elif key == "count":
                    fault.count = int(value)
                else:
                    fault.params[key] = value
            except ValueError as exc:
                raise FaultSpecError(f"bad number in {entry!r}") from exc
        faults.append(fault)
    return faults, seed


class Faults:
    """The active faults; `fire(kind)` says whether this opportunity fails (and consumes a count)."""

    def __init__(self, spec: str | None = None) -> None:
        self.spec = ""
        self._faults: list[Fault] = []
        self._rng = random.Random(0)
        if spec:
            self.set(spec)

    def set(self, spec: str) -> None:
        faults, seed = parse(spec)
        self.spec = spec
        self._faults = faults
        self._rng = random.Random(seed)

    def clear(self) -> None:
        self.set("")

    def active(self, kind: str) -> Fault | None:
        return next((f for f in self._faults if f.kind == kind), None)

    def fire(self, kind: str, *, path: str = "", method: str = "") -> Fault | None:
        for fault in self._faults:
            if fault.kind != kind:
                continue
            if "match" in fault.params and fault.params["match"].lower() not in path.lower():
                continue
            if "method" in fault.params and fault.params["method"].upper() != method.upper():
                continue
            if fault.count is not None:
                if fault.fired >= fault.count:
                    continue
            elif fault.rate is not None and self._rng.random() >= fault.rate:
                continue
            fault.fired += 1
            return fault
        return None

    def describe(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "faults": [
                {"kind": f.kind, "rate": f.rate, "count": f.count, "params": f.params, "fired": f.fired}
                for f in self._faults
            ],
        }
