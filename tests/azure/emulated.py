"""Helpers for tests that drive acagpu's AzureCloud against the emulator."""

from __future__ import annotations

import time

from aca_gpu.azure.cloud import AzureCloud


def wait_finished(cloud: AzureCloud, rg: str, job: str, execution: str, timeout: float = 60.0) -> str | None:
    """The execution's final status, or None if it has not finished within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = cloud.get_execution(rg, job, execution)
        if info.finished:
            return info.status
        time.sleep(0.05)
    return None
