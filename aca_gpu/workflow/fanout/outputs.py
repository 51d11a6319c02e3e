"""`--output-dir DIR`: each succeeded shard's folder on the environment's share, brought into DIR/k.

Shard k wrote into `$ACAGPU_OUTPUT_DIR`, which is the folder `<run>/<k>` of the environment's
`acagpu-results` Azure Files share (made before the shard started). Once the run is torn down
(nothing bills), the folder of every shard that succeeded is downloaded through the Azure Files
data plane (the Azure SDK for File Shares, `azure/fileshare.py`) into DIR/k; a failed shard's
partial files stay on the share only (its rerun writes them again). The share keeps everything
until `acagpu env delete` removes it.

A file arrives whole or not at all: it is written under a partial name and renamed when complete,
a transfer a fault cut is tried again (each retry said), and one that still did not arrive is
named in the document while every other file still comes (it stays on the share).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.output import NullProgress, Progress
from aca_gpu.workflow.fanout.outcome import FanoutOutcome
from aca_gpu.workflow.fanout.spec import RESULTS_SHARE, FanoutSpec

STEP = "outputs"  # the progress step's name (its typical time: aca_gpu/output.py)


def download(
    cloud: Cloud,
    runtime: Any,
    fanout: FanoutSpec,
    outcome: FanoutOutcome,
    progress: Progress | None = None,
) -> dict[str, Any]:
    assert fanout.output_dir is not None
    progress = progress if progress is not None else NullProgress()
    dest = fanout.output_dir
    made = getattr(runtime, "results_made", None)
    group = getattr(runtime, "group", None)
    doc: dict[str, Any] = {
        "dir": str(dest),
        "share": RESULTS_SHARE,
        "folder": fanout.share_subdir,
        "files": 0,
        "missing": [],
    }
    if made is None or group is None:
        doc["error"] = "the environment's results share was not found"
        return doc
    doc["account"] = made.account
    done = sorted(s.task.index for s in outcome.states if s.state == "succeeded")
    folders = {fanout.share_folder(k): dest / str(k) for k in done}
    run_folder = f"{fanout.share_subdir}/"
    try:
        with progress.step(STEP) as step:
            step.update(f"{len(done)} shards' folders from share {RESULTS_SHARE} into {dest}")

            def retried(text: str) -> None:
                step.update(f"retrying {text.removeprefix(run_folder)}")
                progress.warn(f"outputs: retrying {text.removeprefix(run_folder)}")

            dest.mkdir(parents=True, exist_ok=True)
            got = cloud.download_share_folders(group.name, made.account, RESULTS_SHARE, folders, retried)
            missed = f", {len(got.missed)} not downloaded" if got.missed else ""
            step.update(f"{len(got.written)} files{missed}")
    except AcaGpuError as exc:
        doc["error"] = f"not downloaded: {exc.message}"
        return doc
    except OSError as exc:
        doc["error"] = f"not downloaded: {dest}: {exc}"
        return doc
    doc["files"] = len(got.written)
    doc["retries"] = got.retries
    doc["shards_with_files"] = sorted({k for f in got.written if (k := _shard_of(dest, f)) is not None})
    doc["missing"] = [{"path": path.removeprefix(run_folder), "why": why} for path, why in got.missed]
    if got.missed:
        named = ", ".join(f"{m['path']} ({m['why']})" for m in doc["missing"][:5])
        more = f" and {len(got.missed) - 5} more" if len(got.missed) > 5 else ""
        doc["error"] = (
            f"{len(got.missed)} not downloaded: {named}{more}; they stay on share {RESULTS_SHARE} "
            f"of account {made.account} under {run_folder}"
        )
    return doc


def _shard_of(dest: Path, path: Path) -> int | None:
    try:
        first = path.relative_to(dest).parts[0]
    except (ValueError, IndexError):
        return None
    return int(first) if first.isdigit() else None
