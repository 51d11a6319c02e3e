"""Cost Management query at subscription and resource-group scope (no provider registration needed)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.costmanagement import responses as r

ROUTES = [
    Route("POST", "/subscriptions/{sub}/providers/Microsoft.CostManagement/query", r.query),
    Route(
        "POST", "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.CostManagement/query", r.query
    ),
]
