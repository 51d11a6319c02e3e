"""Microsoft.Authorization routes at subscription scope (always registered, as on Azure)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.authorization import responses as r

NS = "Microsoft.Authorization"
P = "/subscriptions/{sub}/providers/Microsoft.Authorization"

ROUTES = [
    Route("GET", P + "/roleDefinitions", r.role_definitions_list, namespace=NS),
    Route("GET", P + "/roleDefinitions/{id}", r.role_definitions_get, namespace=NS),
    Route("PUT", P + "/roleDefinitions/{id}", r.role_definitions_create_or_update, namespace=NS),
    Route("DELETE", P + "/roleDefinitions/{id}", r.role_definitions_delete, namespace=NS),
    Route("GET", P + "/roleAssignments", r.role_assignments_list, namespace=NS),
    Route("GET", P + "/roleAssignments/{id}", r.role_assignments_get, namespace=NS),
    Route("PUT", P + "/roleAssignments/{id}", r.role_assignments_create, namespace=NS),
    Route("DELETE", P + "/roleAssignments/{id}", r.role_assignments_delete, namespace=NS),
    Route("GET", P + "/permissions", r.permissions_list, namespace=NS),
    # Permissions_ListForResourceGroup (the spec's scope; the subscription-scope path above is not in it)
    Route(
        "GET",
        "/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Authorization/permissions",
        r.permissions_list,
        namespace=NS,
    ),
]
