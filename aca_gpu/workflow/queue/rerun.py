"""`acagpu run --rerun-failed RUN_ID` for a queue run: only the items that did not succeed, again.

Two cases, by where the run is:

- **the run still exists** (a detached run, before `down`): its failed items go back on its own
  queue, and its Event job's workers take them as any item. First a marker goes on the results
  queue (`{"i": -1, "requeued": [...], "r": n}`), so every reader (`attach`, `results`) counts those
  items as not done until a result of generation n arrives; then the items, each carrying `r: n`,
  which its worker echoes in its result. The item's text comes from its result message.
- **the run is gone** (an attached run tears itself down): its local record (kept beside the
  fan-outs' records, with the request but never a secret's value) gives the image, command, P and
  K and each failed item's text; a new run drains only those, with their original indexes (the
  worker's `ACAGPU_ITEM_INDEX`), attached.

A fan-out's record goes to the fan-out's own rerun (docs/fanout.md).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from aca_gpu.errors import BadInput, NotFound
from aca_gpu.models import Cloud
from aca_gpu.workflow.fanout import ledger as records
from aca_gpu.workflow.queue.detached import Reader, find_queue_run
from aca_gpu.workflow.queue.ledger import Ledger
from aca_gpu.workflow.queue.spec import encode
from aca_gpu.workflow.workload.plan import RunRequest

MARKER_CHUNK = 4000  # indexes per marker message (well inside 64 KiB after base64)


def local_record(run_id: str) -> dict[str, Any] | None:
    """The run's record on this machine (a fan-out's or a queue run's), None when there is none."""
    path = records.folder() / f"{run_id}.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def is_queue_record(record: dict[str, Any] | None) -> bool:
    return record is not None and (record.get("document") or {}).get("mode") == "queue"


def not_found(run_id: str) -> BadInput:
    """Neither a record here nor a live queue run: what --rerun-failed can and cannot find."""
    where = records.folder()
    if records.known_run(run_id):
        return BadInput(
            f"--rerun-failed {run_id}: run {run_id} ran here but is neither a fan-out (--shards/--map) "
            f"nor a queue run (--workers) recorded in {where}"
        )
    return BadInput(
        f"--rerun-failed {run_id}: no run {run_id} is recorded here ({where}) and no queue run {run_id} "
        "exists in Azure: a fan-out or an attached queue run is rerun from this machine's record, a "
        "detached queue run from Azure until it is removed"
    )


def live_run(cloud: Cloud, run_id: str) -> Reader | None:
    """The queue run `run_id` as it is in Azure, or None when it no longer exists (or is no queue run)."""
    try:
        run = find_queue_run(cloud, run_id)
    except NotFound:
        return None
    return Reader(cloud, run, cloud.queues(run.env_group, run.account), Ledger.of(run.size))


def requeue_failed(reader: Reader, say: Callable[[str], None]) -> dict[str, Any]:
    """Put a finished detached run's failed items back on its queue; the document says which."""
    run_id = reader.run.run_id
    reader.read_all(say)
    ledger = reader.ledger
    if not ledger.done:
        raise BadInput(
            f"--rerun-failed {run_id}: run {run_id} is not done ({ledger.final} of {ledger.size} items "
            f"final): `acagpu attach {run_id}` follows it to the end"
        )
    failed = ledger.failed_indexes()
    if not failed:
        raise BadInput(f"--rerun-failed {run_id}: every item of run {run_id} succeeded; nothing to rerun")
    unknown = [k for k in failed if k not in ledger.items]
    if unknown:
        raise BadInput(
            f"--rerun-failed {run_id}: the text of item(s) {', '.join(map(str, unknown[:10]))} is not in "
            "their results (too large for one message): run those items again with --map"
        )
    generation = max(ledger.generation.values(), default=0) + 1
    markers = [
        base64.b64encode(
            json.dumps({"i": -1, "requeued": failed[k : k + MARKER_CHUNK], "r": generation}).encode()
        ).decode()
        for k in range(0, len(failed), MARKER_CHUNK)
    ]
    reader.queues.send(reader.run.results_queue, markers)  # first: readers stop counting the old result
    reader.queues.send(reader.run.work_queue, [encode(k, ledger.items[k], generation) for k in failed])
    say(f"requeued {len(failed)} item(s) on {reader.run.work_queue}: {', '.join(map(str, failed[:20]))}")
    return {
        "schema": 1,
        "command": "run",
        "mode": "queue",
        "run_id": run_id,
        "status": "requeued",
        "exit_code": 0,
        "exit_code_from": "acagpu",
        "requeued": failed,
        "generation": generation,
        "teardown": {"status": "detached"},
        "error": None,
    }


def failed_of_record(
    run_id: str, record: dict[str, Any]
) -> tuple[RunRequest, dict[str, Any], list[dict[str, Any]]]:
    """(request, queue options, the failed items' docs) of a finished attached run's record."""
    document = record.get("document") or {}
    if document.get("status") == "detached":
        raise BadInput(
            f"--rerun-failed {run_id}: run {run_id} was detached and no longer exists: its results went "
            "with its queues (`acagpu results` before `down` keeps them)"
        )
    failed = [i for i in document.get("items") or [] if i.get("status") != "succeeded"]
    if not failed:
        raise BadInput(f"--rerun-failed {run_id}: every item of run {run_id} succeeded; nothing to rerun")
    fields = RunRequest.__dataclass_fields__
    kept: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in (record.get("request") or {}).items()
        if k in fields
    }
    request = RunRequest(**kept)
    return request, dict(record.get("fanout") or {}), failed
