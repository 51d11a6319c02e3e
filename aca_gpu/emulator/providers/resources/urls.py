"""Microsoft.Resources routes (paths matched case-insensitively, as ARM does)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.resources import responses as r

SUB = "/subscriptions/{sub}"
RG = SUB + "/resourcegroups/{rg}"

ROUTES = [
    Route("GET", "/subscriptions", r.subscriptions_list),
    Route("GET", SUB, r.subscriptions_get),
    Route("GET", "/tenants", r.tenants_list),
    Route("GET", SUB + "/resources", r.resources_list),
    Route("GET", SUB + "/resourcegroups", r.resource_groups_list),
    Route("PUT", RG, r.resource_groups_create_or_update),
    Route("GET", RG, r.resource_groups_get),
    Route("HEAD", RG, r.resource_groups_check_existence),
    Route("PATCH", RG, r.resource_groups_update),
    Route("DELETE", RG, r.resource_groups_delete),
    Route("GET", RG + "/resources", r.resources_list_by_resource_group),
    Route("GET", SUB + "/operationresults/{op}", r.resource_groups_operation_result),
    Route("GET", SUB + "/providers", r.providers_list),
    Route("GET", SUB + "/providers/{namespace}", r.providers_get),
    Route("POST", SUB + "/providers/{namespace}/register", r.providers_register),
]
