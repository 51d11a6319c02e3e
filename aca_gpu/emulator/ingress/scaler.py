"""The HTTP scale rule between one replica and `maxReplicas`: how many replicas the requests in
flight want, and when the extra ones go.

ACA's scale page: "When the number of HTTP requests exceeds [concurrentRequests], then another
replica is added. Replicas continue to add to the pool up to the maxReplicas amount". ACA scales
through KEDA over Kubernetes' horizontal pod autoscaler, whose algorithm is
`desiredReplicas = ceil(currentReplicas x currentMetric / target)` (so ceil(total / target) for a
per-replica average) and whose default scale-down stabilization window is 300 s; that ACA keeps
those defaults, what its HTTP scaler counts as the metric (requests in flight at one instant, or
an average over a window) and how often it looks are UNCONFIRMED. Here the metric is the requests
the ingress holds or forwards, looked at on each request and each tick; the wanted count is asked
for at once (HPA's scale-up rate limits are not modelled), and the extra replicas go once fewer
have been wanted for `cooldownPeriod` (300 s by default, as that window) on the scaled clock.
Going to zero stays activation.py's rule (the cooldown after the last request).
"""

from __future__ import annotations

import math
from typing import Any

from aca_gpu.emulator.state import Replica, Revision

DEFAULT_CONCURRENCY = 10  # ACA's concurrentRequests default
DEFAULT_MAX_REPLICAS = 10  # Scale.maxReplicas default


def concurrency(template: dict[str, Any]) -> int:
    """The first HTTP rule's `concurrentRequests` (ACA's default 10 without one)."""
    for rule in (template.get("scale") or {}).get("rules") or []:
        http = rule.get("http") if isinstance(rule, dict) else None
        if isinstance(http, dict):
            try:
                return max(
                    1, int((http.get("metadata") or {}).get("concurrentRequests") or DEFAULT_CONCURRENCY)
                )
            except (TypeError, ValueError):
                return DEFAULT_CONCURRENCY
    return DEFAULT_CONCURRENCY


def wanted(template: dict[str, Any], inflight: int) -> int:
    """ceil(requests in flight / concurrentRequests), within minReplicas (at least 1 while a
    request is in flight) and maxReplicas."""
    scale = template.get("scale") or {}
    low = int(scale.get("minReplicas") or 0)
    high = int(scale.get("maxReplicas") or DEFAULT_MAX_REPLICAS)
    need = math.ceil(inflight / concurrency(template)) if inflight else 0
    return max(low, 1 if inflight else 0, min(high, need))


def counted(rev: Revision) -> int:
    """The replicas the revision has, placed or not."""
    return sum(1 for r in rev.replicas.values() if not r.gone) + rev.unplaced


def to_remove(rev: Revision, keep: int, ready: set[str], load: dict[str, int]) -> list[str]:
    """Which replicas go when only `keep` are wanted: those serving nothing first (not ready, then
    idle), the newest first among equals."""
    live: list[Replica] = [r for r in rev.replicas.values() if not r.gone]
    if len(live) <= keep:
        return []
    order = sorted(
        live,
        key=lambda r: (r.name in ready, load.get(r.name, 0), -r.created.timestamp()),
    )
    return [r.name for r in order[: len(live) - keep]]
