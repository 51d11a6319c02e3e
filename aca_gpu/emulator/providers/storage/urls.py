"""Microsoft.Storage routes: the storage-account and Azure Files share subset `run --create-share` uses,
and a queue as an ARM resource (read, delete) with role assignments at its scope (queue mode)."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.storage import queues as q
from aca_gpu.emulator.providers.storage import responses as r

NS = "Microsoft.Storage"
SUB = "/subscriptions/{sub}/providers/Microsoft.Storage"
ACCOUNT = "/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Storage/storageAccounts/{account}"
SHARE = ACCOUNT + "/fileServices/default/shares/{share}"
QUEUE = ACCOUNT + "/queueServices/default/queues/{queue}"
ASSIGNMENTS = QUEUE + "/providers/Microsoft.Authorization/roleAssignments"
AUTH = "Microsoft.Authorization"

ROUTES = [
    Route("PUT", ACCOUNT, r.accounts_create, namespace=NS),
    Route("GET", ACCOUNT, r.accounts_get, namespace=NS),
    Route("DELETE", ACCOUNT, r.accounts_delete, namespace=NS),
    Route("POST", ACCOUNT + "/listKeys", r.accounts_list_keys, namespace=NS),
    Route("PUT", SHARE, r.shares_create, namespace=NS),
    Route("GET", SHARE, r.shares_get, namespace=NS),
    Route("GET", SUB + "/locations/{location}/asyncoperations/{op}", r.async_operation, namespace=NS),
    Route("GET", QUEUE, q.queue_get, namespace=NS),
    Route("DELETE", QUEUE, q.queue_delete, namespace=NS),
    Route("GET", ASSIGNMENTS, q.assignments_list, namespace=AUTH),
    Route("PUT", ASSIGNMENTS + "/{id}", q.assignment_create, namespace=AUTH),
    Route("GET", ASSIGNMENTS + "/{id}", q.assignment_get, namespace=AUTH),
    Route("DELETE", ASSIGNMENTS + "/{id}", q.assignment_delete, namespace=AUTH),
]
