"""Microsoft.Storage routes: the storage-account and Azure Files share subset `run --create-share` uses."""

from __future__ import annotations

from aca_gpu.emulator.context import Route
from aca_gpu.emulator.providers.storage import responses as r

NS = "Microsoft.Storage"
SUB = "/subscriptions/{sub}/providers/Microsoft.Storage"
ACCOUNT = "/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Storage/storageAccounts/{account}"
SHARE = ACCOUNT + "/fileServices/default/shares/{share}"

ROUTES = [
    Route("PUT", ACCOUNT, r.accounts_create, namespace=NS),
    Route("GET", ACCOUNT, r.accounts_get, namespace=NS),
    Route("DELETE", ACCOUNT, r.accounts_delete, namespace=NS),
    Route("POST", ACCOUNT + "/listKeys", r.accounts_list_keys, namespace=NS),
    Route("PUT", SHARE, r.shares_create, namespace=NS),
    Route("GET", SHARE, r.shares_get, namespace=NS),
    Route("GET", SUB + "/locations/{location}/asyncoperations/{op}", r.async_operation, namespace=NS),
]
