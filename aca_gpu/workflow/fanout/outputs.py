"""`--output-dir DIR`: each succeeded shard's folder on the environment's share, brought into DIR/k.

Shard k wrote into `$ACAGPU_OUTPUT_DIR`, which is the folder `<run>/<k>` of the environment's
`acagpu-results` Azure Files share (made before the shard started). Once the run is torn down
(nothing bills), the folder of every shard that succeeded is downloaded through the Azure Files
data plane (the Azure SDK for File Shares, `azure/fileshare.py`) into DIR/k; a failed shard's
partial files stay on the share only (its rerun writes them again). The share keeps everything
until `acagpu env delete` removes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.workflow.fanout.outcome import FanoutOutcome
from aca_gpu.workflow.fanout.spec import RESULTS_SHARE, FanoutSpec


def download(cloud: Cloud, runtime: Any, fanout: FanoutSpec, outcome: FanoutOutcome) -> dict[str, Any]:
    assert fanout.output_dir is not None
    dest = fanout.output_dir
    made = getattr(runtime, "results_made", None)
    group = getattr(runtime, "group", None)
    doc: dict[str, Any] = {
        "dir": str(dest),
        "share": RESULTS_SHARE,
        "folder": fanout.share_subdir,
        "files": 0,
    }
    if made is None or group is None:
        doc["error"] = "the environment's results share was not found"
        return doc
    doc["account"] = made.account
    try:
        dest.mkdir(parents=True, exist_ok=True)
        done = sorted(s.task.index for s in outcome.states if s.state == "succeeded")
        folders = {fanout.share_folder(k): dest / str(k) for k in done}
        files = cloud.download_share_folders(group.name, made.account, RESULTS_SHARE, folders)
    except AcaGpuError as exc:
        doc["error"] = f"not downloaded: {exc.message}"
        return doc
    except OSError as exc:
        doc["error"] = f"not downloaded: {dest}: {exc}"
        return doc
    doc["files"] = len(files)
    doc["shards_with_files"] = sorted({k for f in files if (k := _shard_of(dest, f)) is not None})
    return doc


def _shard_of(dest: Path, path: Path) -> int | None:
    try:
        first = path.relative_to(dest).parts[0]
    except (ValueError, IndexError):
        return None
    return int(first) if first.isdigit() else None
