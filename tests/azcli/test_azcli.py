"""Opt-in: Microsoft's Azure CLI runs the GPU tutorial's commands against `acagpu emulator serve`.

Set `ACAGPU_AZCLI=/path/to/az` (an `az` from its own virtualenv: `python -m venv azcli-venv &&
azcli-venv/bin/pip install azure-cli==2.91.0`) to run it; without it the test is skipped, because the
Azure CLI is a large install that neither the project venv nor CI carries. The work is done by
benchmarks/azcli_check.py, which prints one PASS/FAIL line per command.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AZ = os.environ.get("ACAGPU_AZCLI", "")

pytestmark = pytest.mark.skipif(
    not AZ, reason="opt-in: set ACAGPU_AZCLI=/path/to/az (azure-cli 2.91 in its own virtualenv)"
)


def _check_module() -> object:
    spec = importlib.util.spec_from_file_location(
        "acagpu_azcli_check", ROOT / "benchmarks" / "azcli_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_azure_cli_runs_the_tutorial_against_the_emulator() -> None:
    az = shutil.which(AZ) or AZ
    assert os.access(az, os.X_OK), f"ACAGPU_AZCLI={AZ} is not an executable"
    check = _check_module()
    outcomes = check.run(az, 0.01)  # type: ignore[attr-defined]
    failed = [f"{o.name}: {o.detail}" for o in outcomes if not o.ok]
    assert not failed, "\n".join(failed)
    names = {o.name for o in outcomes}
    for needed in ("login --identity", "containerapp exec --command nvidia-smi (pty)", "group delete"):
        assert needed in names
