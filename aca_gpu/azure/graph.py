"""Azure Resource Graph: one paged query for acagpu's groups and environments in every subscription.

A listing per subscription costs one ARM call each and knows only the subscriptions it is told;
Resource Graph answers for every subscription the credential can read (tenant scope) in pages of
up to 1,000 rows, following `$skipToken`. Its data trails ARM by seconds, so what acts on a row
(teardown) reads the group again through ARM before deleting it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from aca_gpu.azure.clients import Clients
from aca_gpu.azure.translate import retrying
from aca_gpu.errors import InfraError
from aca_gpu.models import FleetGroup, ResourceGroupInfo
from aca_gpu.naming import TAG_MANAGED, is_managed

PAGE_SIZE = 1000  # Resource Graph's largest page
GROUP_TYPE = "microsoft.resources/subscriptions/resourcegroups"
ENV_TYPE = "microsoft.app/managedenvironments"


def _kql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def managed_query() -> str:
    """Groups and environments tagged acagpu:managed=true, groups first within each id order."""
    managed = f"tags[{_kql_string(TAG_MANAGED)}] =~ 'true'"
    columns = "id, name, type, subscriptionId, resourceGroup, location, tags, properties"
    return (
        f"resourcecontainers | where type =~ '{GROUP_TYPE}' and {managed}"
        f" | union (resources | where type =~ '{ENV_TYPE}' and {managed})"
        f" | project {columns} | order by id asc"
    )


def query_pages(
    clients: Clients, query: str, *, subscriptions: Sequence[str] = (), page_size: int = PAGE_SIZE
) -> Iterator[list[dict[str, Any]]]:
    """Every page of `query` (tenant scope when `subscriptions` is empty), one request each."""
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

    token: str | None = None
    while True:
        request = QueryRequest(
            subscriptions=list(subscriptions) or None,
            query=query,
            options=QueryRequestOptions(top=page_size, skip_token=token, result_format="objectArray"),
        )
        answer = retrying("query Resource Graph", "", partial(clients.graph.resources, request))
        data = answer.data
        if not isinstance(data, list):
            raise InfraError("Resource Graph answered without a row list", code="BadGraphAnswer")
        yield [dict(row) for row in data if isinstance(row, dict)]
        token = answer.skip_token
        if not token:
            return


def visible_subscriptions(clients: Clients) -> list[str]:
    """Every subscription the credential can read, from one query (what `--all-subscriptions` means)."""
    query = (
        "resourcecontainers | where type =~ 'microsoft.resources/subscriptions'"
        " | project subscriptionId | order by subscriptionId asc"
    )
    found = [
        str(row.get("subscriptionId") or "").lower() for page in query_pages(clients, query) for row in page
    ]
    return [s for s in dict.fromkeys(found) if s]


def managed_groups(
    clients: Clients, *, subscriptions: Sequence[str] = (), page_size: int = PAGE_SIZE
) -> list[FleetGroup]:
    """acagpu's resource groups across subscriptions, each with the environments found in it."""
    groups: dict[tuple[str, str], FleetGroup] = {}
    envs: dict[tuple[str, str], list[str]] = {}
    for page in query_pages(clients, managed_query(), subscriptions=subscriptions, page_size=page_size):
        for row in page:
            sub = str(row.get("subscriptionId") or "").lower()
            tags = {str(k): str(v) for k, v in (row.get("tags") or {}).items()}
            kind = str(row.get("type") or "").lower()
            if not sub or not is_managed(tags):  # re-checked: a query must never widen what is deleted
                continue
            if kind == GROUP_TYPE:
                props = row.get("properties") or {}
                info = ResourceGroupInfo(
                    name=str(row.get("name") or ""),
                    location=str(row.get("location") or ""),
                    tags=tags,
                    provisioning_state=props.get("provisioningState") if isinstance(props, dict) else None,
                )
                groups[(sub, info.name.lower())] = FleetGroup(sub, info)
            elif kind == ENV_TYPE:
                envs.setdefault((sub, str(row.get("resourceGroup") or "").lower()), []).append(
                    str(row.get("name") or "")
                )
    return [
        FleetGroup(g.subscription, g.group, tuple(sorted(envs.get(key, ()))))
        for key, g in sorted(groups.items())
    ]
