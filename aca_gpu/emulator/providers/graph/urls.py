"""Microsoft.ResourceGraph routes: one tenant-level query endpoint (no subscription in the path)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.graph import responses as r

NS = "Microsoft.ResourceGraph"

ROUTES = [Route("POST", "/providers/Microsoft.ResourceGraph/resources", r.resources_query, namespace=NS)]
