"""Microsoft.OperationalInsights routes: the Log Analytics workspace subset an environment's logs need."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.operationalinsights import responses as r

NS = "Microsoft.OperationalInsights"
WORKSPACE = "/subscriptions/{sub}/resourcegroups/{rg}/providers/" + NS + "/workspaces/{workspace}"

ROUTES = [
    Route("PUT", WORKSPACE, r.workspaces_create, namespace=NS),
    Route("GET", WORKSPACE, r.workspaces_get, namespace=NS),
    Route("DELETE", WORKSPACE, r.workspaces_delete, namespace=NS),
    Route("POST", WORKSPACE + "/sharedKeys", r.shared_keys, namespace=NS),
]
QUERY_PREFIX = "/v1/workspaces/"  # the query API's own host on Azure (api.loganalytics.io)
