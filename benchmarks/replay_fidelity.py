"""How closely the emulator answers like Azure: Microsoft's recorded Azure CLI traffic, replayed.

Usage: python benchmarks/replay_fidelity.py [--json FILE]

Replays every recording the replay tests use (tests/fixtures/arm-recordings, 2023-2024, as
tests/emulator/test_replay.py does; tests/fixtures/cli-extension-recordings, November 2025, as
test_replay_cli.py does), each on a fresh emulator, and counts per recording:

- recorded: interactions in the file (`+n` polls the file collapsed into its last kept one);
- in scope: those the emulator plays (the CLI's own Log Analytics calls are not);
- replayed: in-scope interactions sent and paired with an answer;
- status: answers with the status code Azure gave;
- shape: answers that also match on shape (test_replay_compare.check_pair: kept headers, top-level
  and `properties` key sets, id/type/name/time forms, the values ARM decides);
- fields: answers whose fields acagpu reads (replay_fields.READ_FIELDS) and log-stream openings
  match Azure's;
- exact: both of the above.

Then the differences left, each under the `test_replay_cli.KNOWN` entry that covers it (issue 22's
class; 0: found by the replay), and any difference no entry covers. Exit status 1 when an in-scope
interaction was not replayed or a difference is not covered.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aca_gpu.emulator.server import EmulatorServer  # noqa: E402
from tests.emulator import test_replay as arm_set  # noqa: E402
from tests.emulator import test_replay_cli as cli_set  # noqa: E402
from tests.emulator.helpers import SCALE  # noqa: E402
from tests.emulator.replay import NOT_EMULATED, Replay  # noqa: E402
from tests.emulator.replay_fields import check_fields, check_log_lines  # noqa: E402
from tests.emulator.test_replay_compare import Pair, check_pair  # noqa: E402


@dataclass
class Row:
    folder: str
    name: str
    recorded: int
    collapsed: int
    in_scope: int
    replayed: int = 0
    status: int = 0
    shape: int = 0
    fields: int = 0
    exact: int = 0
    known: Counter[str] = field(default_factory=Counter)  # KNOWN entry -> interactions it covers
    unknown: list[str] = field(default_factory=list)  # differences the replay tests would fail on
    unjudged: list[str] = field(default_factory=list)  # read fields of the 2023-2024 set (not tested)


def _label(entry: cli_set.Known) -> str:
    return f"class {entry.cls}: {entry.why}"


def _score(row: Row, pairs: list[Pair], mapped: Any, *, fields_judged: bool) -> None:
    """`fields_judged`: test_replay_cli judges the read fields; test_replay (the 2023-2024 answers,
    at api-versions acagpu no longer sends) judges shapes only."""
    row.replayed = len(pairs)
    for pair in pairs:
        shape = check_pair(pair)
        fields = check_fields(pair, mapped) + check_log_lines(pair)
        if pair.refused_version:
            shape.insert(0, f"api-version {pair.refused_version} refused")
        row.status += pair.status == pair.recorded["status"] and not pair.refused_version
        row.shape += not shape
        row.fields += not fields
        row.exact += not shape and not fields
        labels: set[str] = set()
        for diff in shape + fields:
            entry = next((k for k in cli_set.KNOWN if k.covers(pair.kind, diff)), None)
            if entry is None and diff in fields and not fields_judged:
                row.unjudged.append(f"{pair.kind}: {diff}")
            elif entry is None:
                row.unknown.append(f"{pair.kind}: {diff}")
            else:
                labels.add(_label(entry))
        row.known.update(labels)


def _row(folder: str, name: str, items: list[dict[str, Any]]) -> Row:
    in_scope = [i for i in items if not any(s in i["uri"] for s in NOT_EMULATED)]
    collapsed = sum(int(i.get("collapsed", 0)) for i in items)
    return Row(folder, name, len(items), collapsed, len(in_scope))


def replay_everything() -> list[Row]:
    rows: list[Row] = []
    with EmulatorServer(time_scale=SCALE, registered=True) as server:
        assert server.ctx is not None
        for name, items in arm_set.RECORDED.items():
            server.reset()
            server.ctx.clock.scale = SCALE
            replay = Replay(server)
            arm_set.prepare(server, name, replay)
            server.ctx.clock.scale = arm_set.SLOW_FILES.get(name, SCALE)
            replay.replay(items)
            row = _row("arm-recordings", name, items)
            _score(row, replay.pairs, cli_set._mapper(server, replay), fields_judged=False)
            rows.append(row)
        for name, items in cli_set.RECORDED.items():
            server.reset()
            server.ctx.clock.scale = SCALE
            cli_set.prepare(server, items)
            server.ctx.clock.scale = cli_set.SLOW.get(name, SCALE)
            replay = Replay(server, fallback_version=cli_set.FALLBACK_VERSION)
            replay.replay(items)
            row = _row("cli-extension-recordings", name, items)
            _score(row, replay.pairs, cli_set._mapper(server, replay), fields_judged=True)
            rows.append(row)
    return rows


def report(rows: list[Row]) -> str:
    head = f"{'recording':<66} {'rec':>4} {'+n':>4} {'scope':>5} {'sent':>5} {'status':>6} {'shape':>5}"
    lines = [head + f" {'fields':>6} {'exact':>5}"]
    for r in rows:
        lines.append(
            f"{r.folder[:3] + '/' + r.name.removesuffix('.jsonl'):<66} {r.recorded:>4} {r.collapsed:>4} "
            f"{r.in_scope:>5} {r.replayed:>5} {r.status:>6} {r.shape:>5} {r.fields:>6} {r.exact:>5}"
        )
    for folder in ("arm-recordings", "cli-extension-recordings", None):
        part = [r for r in rows if folder is None or r.folder == folder]
        t = {k: sum(getattr(r, k) for r in part) for k in ("in_scope", "replayed", "status", "shape")}
        fields, exact = sum(r.fields for r in part), sum(r.exact for r in part)
        lines.append(
            f"{folder or 'all':<26} {len(part):>2} recordings: {t['replayed']} of {t['in_scope']} in-scope "
            f"interactions replayed; status {t['status']}, shape {t['shape']}, fields {fields}, "
            f"exact {exact} of {t['replayed']}"
        )
    known: Counter[str] = Counter()
    for r in rows:
        known.update(r.known)
    lines.append("differences left (interactions each covers):")
    lines += [f"  {n:>4}  {label}" for label, n in sorted(known.items())]
    unjudged = Counter(f"{r.name}: {d}" for r in rows for d in r.unjudged)
    lines += [f"  {n:>4}  not judged (2023-2024 set, read fields): {d}" for d, n in sorted(unjudged.items())]
    unknown = Counter(f"{r.name}: {d}" for r in rows for d in r.unknown)
    lines += [f"  {n:>4}  not in KNOWN: {d}" for d, n in sorted(unknown.items())] or ["  none outside KNOWN"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the per-recording counts here")
    args = parser.parse_args(argv)
    rows = replay_everything()
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")
    whole = all(r.replayed == r.in_scope for r in rows)
    return 0 if whole and not any(r.unknown for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
