"""Microsoft.ContainerRegistry routes: registries (PUT/GET/DELETE), checkNameAvailability,
importImage (an LRO), a registry-scope role assignment, and the streaming conversion state."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.registry import responses as r

NS = "Microsoft.ContainerRegistry"
SUB = "/subscriptions/{sub}/providers/Microsoft.ContainerRegistry"
REGISTRY = (
    "/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.ContainerRegistry/registries/{registry}"
)
ASSIGNMENT = REGISTRY + "/providers/Microsoft.Authorization/roleAssignments/{id}"

ROUTES = [
    Route("POST", SUB + "/checkNameAvailability", r.check_name, namespace=NS),
    Route("PUT", REGISTRY, r.registries_create, namespace=NS),
    Route("GET", REGISTRY, r.registries_get, namespace=NS),
    Route("DELETE", REGISTRY, r.registries_delete, namespace=NS),
    Route("POST", REGISTRY + "/importImage", r.import_image, namespace=NS),
    Route("GET", REGISTRY + "/operationStatuses/{op}", r.operation_status, namespace=NS),
    Route("PUT", ASSIGNMENT, r.assignment_create, namespace="Microsoft.Authorization"),
    Route("GET", ASSIGNMENT, r.assignment_get, namespace="Microsoft.Authorization"),
]
