"""Which subscriptions a command looks at, and acagpu's groups in them.

One subscription is listed through ARM (one call, no extra permission). Several, or every one the
credential can see (`--all-subscriptions`), are asked through Azure Resource Graph: one paged
query instead of a listing per subscription, and subscriptions nobody named are found too.
"""

from __future__ import annotations

from dataclasses import dataclass

from aca_gpu.config import Settings
from aca_gpu.errors import BadInput
from aca_gpu.models import Cloud, FleetGroup
from aca_gpu.workflow.fleet.reap_delete import CachedClouds


@dataclass(frozen=True)
class Scope:
    """The subscriptions named (`--subscription`, repeatable) or all of them (`--all-subscriptions`)."""

    subscriptions: tuple[str, ...] = ()
    everything: bool = False

    def __post_init__(self) -> None:
        if self.everything and self.subscriptions:
            raise BadInput("--all-subscriptions and --subscription exclude each other; pass one of them")

    @property
    def uses_graph(self) -> bool:
        return self.everything or len(self.subscriptions) > 1


def find_groups(settings: Settings, scope: Scope, *, page_size: int | None = None) -> list[FleetGroup]:
    """acagpu's groups (and their environments) across the scope, from Resource Graph."""
    from aca_gpu.azure.clients import Clients
    from aca_gpu.azure.graph import PAGE_SIZE, managed_groups

    clients = Clients(settings, subscription_id="")
    subs = () if scope.everything else scope.subscriptions
    return managed_groups(clients, subscriptions=subs, page_size=page_size or PAGE_SIZE)


def subscription_ids(settings: Settings, scope: Scope) -> list[str | None]:
    """The subscriptions a per-subscription API (Cost Management) is asked in: the named ones, every
    visible one (one Resource Graph query), or the configured one (None)."""
    if not scope.everything:
        return list(scope.subscriptions) or [None]
    from aca_gpu.azure.clients import Clients
    from aca_gpu.azure.graph import visible_subscriptions

    return list(visible_subscriptions(Clients(settings, subscription_id=""))) or [None]


def cloud_source(settings: Settings) -> CachedClouds:
    """A Cloud per subscription, opened when first needed, sharing the command's settings."""
    from aca_gpu.workflow.base.context import open_cloud

    def opener(subscription: str) -> Cloud:
        return open_cloud(settings.with_overrides(subscription=subscription))

    return CachedClouds(opener=opener)


def subscriptions_holding(settings: Settings, run_id: str) -> list[str]:
    """The visible subscriptions that hold run `run_id` (one Resource Graph query): where a run that
    is not in the command's own subscription is, so that `down` never calls a billing run absent."""
    from aca_gpu.naming import TAG_RUN_ID

    found = find_groups(settings, Scope(everything=True))
    return sorted({g.subscription for g in found if g.group.tags.get(TAG_RUN_ID) == run_id})
