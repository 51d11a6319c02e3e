"""`serve --measure N`: N cold cycles, then M warm requests, and what a cold start costs to avoid.

A cycle waits until the app is at zero replicas (seen by listing them, not assumed from the
cooldown), sends one request and reads its phases from the platform's events and the client's
clock (phases.py). A first request the ingress cut off (its 504) is sent again, as a client with
retries would, until the answer or the load timeout; such a cycle is flagged with what each remedy
costs a month, from the same meters as `cost`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aca_gpu import cost
from aca_gpu.errors import WaitTimedOut
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.units import duration_text
from aca_gpu.workflow.base.context import Waiter
from aca_gpu.workflow.serve import http
from aca_gpu.workflow.serve.phases import cycle_phases, phase_stats

INGRESS_TIMEOUT_S = 240.0  # ACA's default request idle timeout (reference aca-2026 §12)
CUTOFF_STATUSES = (502, 503, 504)  # what a client sees when the ingress gave up on a held request
HOURS_PER_MONTH = 730.0
RETRY_PAUSE_S = 0.5
# premium ingress needs a workload profile of at least 2 dedicated nodes; the smallest
# general-purpose one, D4 (4 vCPU, 16 GiB), prices it (UNCONFIRMED that D4 is accepted for it)
PREMIUM_NODES, PREMIUM_NODE_VCPU, PREMIUM_NODE_GIB = 2, 4, 16


@dataclass(frozen=True)
class Target:
    """A served app as a measurement needs it."""

    resource_group: str
    app: str
    url: str
    health: str
    cooldown_s: int
    load_timeout_s: float  # how long the client waits for one cold answer, retries included
    usd_per_hour: float
    location: str
    verify: str | bool = True


def cold_request(target: Target, cancel: Callable[[], bool]) -> tuple[list[http.Answer], float]:
    """GET until an answer that is no cut-off (or the load timeout): the attempts and the end time."""
    deadline = time.monotonic() + target.load_timeout_s
    attempts: list[http.Answer] = []
    while True:
        left = max(1.0, deadline - time.monotonic())
        answer = http.get(target.url + target.health, timeout=left, verify=target.verify)
        attempts.append(answer)
        if answer.status and answer.status not in CUTOFF_STATUSES:
            break
        if time.monotonic() >= deadline or cancel():
            break
        time.sleep(RETRY_PAUSE_S)
    return attempts, time.time()


def remedies(target: Target) -> list[dict[str, Any]]:
    """What avoiding the cut-off costs a month, per remedy, from the price table `cost` uses."""
    table = cost.load_prices()
    vcpu = table.meter("Dedicated vCPU Usage", target.location).per_hour
    mem = table.meter("Dedicated Memory Usage", target.location).per_hour
    mgmt = table.meter(table.management_meter, target.location).per_hour
    premium = PREMIUM_NODES * (PREMIUM_NODE_VCPU * vcpu + PREMIUM_NODE_GIB * mem) + mgmt
    return [
        {
            "remedy": "--min-replicas 1",
            "usd_per_month": round(target.usd_per_hour * HOURS_PER_MONTH, 2),
            "why": "one replica always warm: no cold start, the GPU bills all month",
        },
        {
            "remedy": "premium ingress",
            "usd_per_month": round(premium * HOURS_PER_MONTH, 2),
            "why": f"request timeout up to 30 min; needs a workload profile of >= {PREMIUM_NODES} dedicated "
            f"nodes (priced as D4: {PREMIUM_NODE_VCPU} vCPU, {PREMIUM_NODE_GIB} GiB each, + management)",
        },
        {
            "remedy": "client retries with backoff",
            "usd_per_month": 0.0,
            "why": "the first request fails at the cut-off; a retry gets the answer once the replica is up",
        },
    ]


def warm(target: Target, count: int, concurrency: int) -> dict[str, Any]:
    """`count` requests, `concurrency` at a time, to a replica already running: p50/p95/p99."""
    if count <= 0:
        return {}
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answers = list(
            pool.map(
                lambda _: http.get(target.url + target.health, timeout=60.0, verify=target.verify),
                range(count),
            )
        )
    good = [a for a in answers if a.ok]
    return {
        "requests": count,
        "concurrency": concurrency,
        "ok": len(good),
        "failed": count - len(good),
        "total_s": http.percentiles([a.total_s for a in good]),
        "first_byte_s": http.percentiles([a.first_byte_s for a in good if a.first_byte_s is not None]),
    }


def measure(
    cloud: Cloud,
    target: Target,
    cycles: int,
    requests: int,
    concurrency: int,
    waiter: Waiter,
    progress: Progress,
    *,
    cutoff_s: float = INGRESS_TIMEOUT_S,
) -> dict[str, Any]:
    """The measurement document: every cycle, p50/p95 per phase, warm percentiles, flags, remedies."""
    done: list[dict[str, Any]] = []
    for number in range(1, cycles + 1):
        with progress.step(f"cold cycle {number}/{cycles}") as step:
            step.update(
                f"waiting for {target.app} to be at zero replicas (listed; the cooldown is "
                f"{duration_text(target.cooldown_s)} after the last request)"
            )
            waiter.until(
                f"{target.app} at zero replicas",
                lambda: True if not cloud.list_app_replicas(target.resource_group, target.app) else None,
                timeout=max(60.0, target.cooldown_s * 2.0 + 120.0),
                describe=lambda: (
                    f"{len(cloud.list_app_replicas(target.resource_group, target.app))} replica(s)"
                ),
            )
            step.update(f"GET {target.url}{target.health}: waiting for the replica to start and answer")
            attempts, end = cold_request(target, waiter.cancel.is_set)
            last = attempts[-1]
            first_byte = last.sent + last.first_byte_s if last.first_byte_s is not None else None
            events = cloud.system_events(target.resource_group, app=target.app, tail=200)
            cycle = cycle_phases(events, target.app, sent=attempts[0].sent, first_byte=first_byte, end=end)
            cut = [a for a in attempts if a.status in CUTOFF_STATUSES or a.status == 0]
            cycle.update(
                cycle=number,
                status=last.status,
                attempts=[a.as_dict() for a in attempts],
                cut_off=bool(cut) or cycle["end_to_end_s"] > cutoff_s,
            )
            done.append(cycle)
            step.update(
                f"{last.status or 'no answer'} after {duration_text(cycle['end_to_end_s'])}"
                + (" (the first request was cut off at the ingress timeout)" if cycle["cut_off"] else "")
            )
            if not last.ok:
                step.status = "fail"
                raise WaitTimedOut(
                    f"cold cycle {number}: no answer from {target.url}{target.health} within "
                    f"{duration_text(target.load_timeout_s)} (last: {last.status or last.error})",
                    code="NoAnswer",
                )
    warm_doc: dict[str, Any] = {}
    if requests:
        with progress.step(f"{requests} warm requests") as step:
            warm_doc = warm(target, requests, concurrency)
            p = warm_doc["total_s"]
            step.update(f"p50 {p['p50']} s, p95 {p['p95']} s, p99 {p['p99']} s ({warm_doc['failed']} failed)")
    flagged = [c["cycle"] for c in done if c["cut_off"]]
    doc: dict[str, Any] = {
        "cycles": done,
        "phase_percentiles": phase_stats(done),
        "warm": warm_doc,
        "ingress_timeout_s": cutoff_s,
        "flagged_cycles": flagged,
        "remedies": remedies(target) if flagged else [],
    }
    return doc
