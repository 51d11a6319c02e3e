"""What `status` shows of a served run: its app's URL, how many replicas run now, and their spend.

A served run's group names its app (`acagpu:served`); the app's FQDN and replicas are read live, so
`status` says whether the app is at zero (billing nothing) or serving, and where it answers. What
its replicas cost is the run's one spend figure (`spend/served.py`: their lives from the app's
system events, priced like any replica), repeated here beside the URL.
"""

from __future__ import annotations

from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.naming import TAG_SERVED  # not serve.plan's copy: `status` need not load the planner
from aca_gpu.workflow.spend import RunSpend
from aca_gpu.workflow.spend.served import EVENTS_FROM


def served_view(
    cloud: Cloud, resource_group: str, tags: dict[str, str], spend: RunSpend
) -> dict[str, Any] | None:
    """{app, url, fqdn, replicas, spend} of a served run; None for any other run. The spend is the
    run's own figure (`spend.so_far`, from the app's events), so `status` shows one figure. A read
    that fails says so in the view rather than failing `status`."""
    app = tags.get(TAG_SERVED)
    if not app:
        return None
    clients = getattr(cloud, "clients", None)
    view: dict[str, Any] = {"app": app, "url": None, "fqdn": None, "replicas": None}
    if clients is None:
        return view
    from aca_gpu.azure import served

    try:
        found = served.read_served(clients, resource_group, app)
        if found is None:
            view["error"] = "app not found (deleted, or not made yet)"
            return view
        view["fqdn"] = found.fqdn
        view["url"] = served.url_of(clients, found.fqdn) if found.fqdn else None
        view["replicas"] = len(cloud.list_app_replicas(resource_group, app))
    except AcaGpuError as exc:
        view["error"] = exc.message
    view["replica_seconds"] = round(spend.gpu_seconds, 1)
    view["replicas_seen"] = spend.executions.served_replicas
    view["replica_seconds_from"] = EVENTS_FROM
    view["usd_estimate"] = spend.usd
    view["usd_basis"] = spend.basis
    return view
