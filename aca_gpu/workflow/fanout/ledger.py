"""The local record of each fan-out, for `acagpu run --rerun-failed RUN_ID`.

One JSON file per run in the cache directory: the request (image, command, options; secret values
and registry passwords never, only the names of the variables that hold them), the items of
--map, and the run's document (every shard and attempt). A rerun reads it, starts only the shards
that did not succeed, with their own indexes and N, as a new run. Like all local state it is a
cache: a fan-out made on another machine is not here, and the refusal says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import BadInput
from aca_gpu.workflow.workload.plan import RunRequest

KEPT_REQUEST = tuple(f for f in RunRequest.__dataclass_fields__ if f != "run_id")


def folder() -> Path:
    base = os.environ.get("ACAGPU_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "acagpu") / "fanout"


def save(request: RunRequest, fanout: dict[str, Any], document: dict[str, Any]) -> Path | None:
    """Write the run's record (never fails the run for a disk problem)."""
    record = {
        "request": {k: v for k, v in asdict(request).items() if k in KEPT_REQUEST},
        "fanout": fanout,
        "document": document,
    }
    target = folder() / f"{document['run_id']}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.replace(target)
    except OSError:
        return None
    return target


def load_failed(run_id: str) -> tuple[RunRequest, dict[str, Any], tuple[int, ...]]:
    """(request, fan-out options, failed indexes) of a fan-out run; BadInput when there is none."""
    naming.validate_run_id(run_id)
    path = folder() / f"{run_id}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        if known_run(run_id):
            raise BadInput(
                f"--rerun-failed {run_id}: run {run_id} is not a fan-out (--shards/--map)"
            ) from None
        raise BadInput(
            f"--rerun-failed {run_id}: no fan-out run {run_id} is recorded here ({path.parent}); "
            "only a run --shards/--map made on this machine can be rerun"
        ) from exc
    except (OSError, ValueError) as exc:
        raise BadInput(f"--rerun-failed {run_id}: its record {path} cannot be read ({exc})") from exc
    document = record.get("document") or {}
    if document.get("mode") != "fanout":
        raise BadInput(f"--rerun-failed {run_id}: run {run_id} is not a fan-out (--shards/--map)")
    summary = document.get("summary") or {}
    # a Ctrl-C's stopped and never-started shards did not succeed either: they run again too
    failed = tuple(
        sorted(
            {
                int(i)
                for i in (summary.get("failed_indexes") or []) + (summary.get("unfinished_indexes") or [])
            }
        )
    )
    if not failed:
        raise BadInput(f"--rerun-failed {run_id}: every shard of run {run_id} succeeded; nothing to rerun")
    request = RunRequest(**{k: _tuple(v) for k, v in (record.get("request") or {}).items()})
    return request, dict(record.get("fanout") or {}), failed


def known_run(run_id: str) -> bool:
    """True when the spend ledger has the run: it ran here, as something other than a fan-out."""
    from aca_gpu.workflow.spend.ledger import ledger_path

    try:
        with ledger_path().open(encoding="utf-8") as fh:
            return any(json.loads(line).get("run_id") == run_id for line in fh if line.strip())
    except (OSError, ValueError):
        return False


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
