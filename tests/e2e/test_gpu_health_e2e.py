"""A simulated unhealthy GPU through `up` end to end: the `gpu` fault spoils what `nvidia-smi -q`
prints in the explorer; a failed GPU is exit 5 with the finding named, a degraded one passes with a
warning (exit 5 under --strict), and nothing is left behind either way. `report merge` shows the
health per image × GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from aca_gpu.cli import cli

# --max-minutes is on the emulated clock: 5 minutes at the e2e scale (0.005) was 1.5 wall s for a
# tester job's whole life, which placement on a loaded machine outran (DeadlineExceeded); 30 is 9 s
UP = ["up", "--yes", "--gpu", "t4", "-l", "eastus", "--max-minutes", "30", "-o", "json"]


def _up(*extra: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, [*UP, *extra])
    return result.exit_code, json.loads(result.stdout), result.stderr


def _left(emu: Any) -> list[str]:
    """What still bills: apps and jobs (the group's own delete goes on after billing stopped)."""
    inventory = emu.inventory()
    return [k for k in ("apps", "jobs") if inventory[k]]


def test_unhealthy_gpus_in_up(emu: Any, tmp_path: Path) -> None:
    emu.set_faults("gpu:health=ecc+remap")
    code, doc, err = _up()
    assert code == 5, err
    assert doc["status"] == "gpu_check_failed"
    message = doc["error"]["message"]
    assert "GPU health failed: gpu0: 2 uncorrectable ECC error(s) since the driver loaded" in message
    assert doc["teardown"]["billing_stopped"]
    health = doc["explorer"]["health"]
    codes = {f["code"] for f in health["gpus"][0]["findings"]}
    assert {"ecc-uncorrectable", "page-retirement-pending"} <= codes  # T4: retired pages, not rows
    assert "error: " in err and "GPU health failed" in err
    assert not _left(emu)

    emu.set_faults("gpu:health=pcie+throttle")
    code, doc, err = _up()
    assert code == 0, err
    assert doc["status"] == "ok" and doc["results"][0]["health_verdict"] == "degraded"
    assert doc["warnings"] and all("GPU health" in w for w in doc["warnings"])
    assert "warning: " in err and "PCIe link x8 of x16" in err
    assert not _left(emu)
    path = tmp_path / "degraded.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    markdown = tmp_path / "matrix.md"
    merged = CliRunner().invoke(cli, ["report", "merge", str(path), "--markdown", str(markdown)])
    assert merged.exit_code == 0, merged.stderr
    assert "pass/degraded" in merged.stdout
    table = markdown.read_text(encoding="utf-8")
    assert "⚠️ health degraded" in table and "Degraded GPUs (passed with a warning)" in table

    code, doc, err = _up("--strict")
    assert code == 5, err
    assert "GPU health degraded" in doc["error"]["message"] and "(--strict)" in doc["error"]["message"]
