"""`acagpu compat` as a user asks it: an image, and ACA's driver unless another is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_compat_without_driver_judges_against_acas_current_driver_and_says_which(tmp_path: Path) -> None:
    """`compat --image X` stopped at "Missing option '--driver'"; the question a user asks is "on
    ACA?": the last driver a GPU replica reported here, else the bundled one, named in the answer."""
    from click.testing import CliRunner

    from aca_gpu.cli import cli
    from aca_gpu.workflow.preflight.drivers import BUNDLED_DRIVER, remember_driver

    def ask(*args: str) -> dict[str, Any]:
        argv = ["compat", "--image", "nvidia/cuda:12.4.1-base-ubuntu22.04", "-o", "json", *args]
        result = CliRunner().invoke(cli, argv, env={"ACAGPU_CACHE_DIR": str(tmp_path)})
        assert result.exit_code == 0, result.output
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    bundled = ask()
    assert bundled["driver_version"] == BUNDLED_DRIVER and bundled["driver_source"].startswith("bundled")
    remember_driver(
        "Consumption-GPU-NC8as-T4", "eastus", "575.57.08", tmp_path / "drivers.json", how="nvidia-smi"
    )
    seen = ask()
    assert seen["driver_version"] == "575.57.08" and "latest seen here" in seen["driver_source"], seen
    assert ask("--driver", "550.54.15")["driver_source"] == "--driver"
