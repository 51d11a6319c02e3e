"""Data-plane routes: the real path shapes, on the emulator's host (no /providers/ segment)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.dataplane import exec as exec_
from aca_gpu.emulator.dataplane import streams

RG = "/subscriptions/{sub}/resourcegroups/{rg}"
APP_REPLICA = RG + "/containerApps/{app}/revisions/{rev}/replicas/{replica}/containers/{container}"
JOB_REPLICA = RG + "/jobs/{job}/executions/{execution}/replicas/{replica}/containers/{container}"

ROUTES = [
    Route("GET", APP_REPLICA + "/exec", exec_.exec_ws, plane="data"),
    Route("GET", JOB_REPLICA + "/exec", exec_.exec_ws, plane="data"),
    Route("GET", APP_REPLICA + "/logstream", streams.logstream, plane="data"),
    Route("GET", JOB_REPLICA + "/logstream", streams.logstream, plane="data"),
    Route("GET", RG + "/containerApps/{app}/eventstream", streams.eventstream, plane="data"),
    Route("GET", RG + "/managedEnvironments/{env}/eventstream", streams.eventstream, plane="data"),
]
