"""`acagpu env show NAME`: one warm environment in detail, where `env list` gives one line each.

Besides the list's facts (region, profiles, state, runs inside, expiry, idle cost) it reads the
environment's storages (names only: an Azure Files key is never read back here) and what the runs
inside have cost so far, priced as `status` prices them (`spend.so_far.run_spend`, replica
lifetimes), so the environment's spend is one figure with the runs' own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.units import usd_text
from aca_gpu.workflow.base.context import run_from_group
from aca_gpu.workflow.env import lifecycle
from aca_gpu.workflow.env.find import find_env, run_groups
from aca_gpu.workflow.spend.so_far import run_spend


def show(cloud: Cloud, name: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The `env list` view of `name` plus storages, the runs' spend so far and the idle TTL."""
    now = now or datetime.now(UTC)
    group, _ = find_env(cloud, name, to_use=False)
    doc = lifecycle.view(cloud, group, now=now)
    try:
        doc["storages"] = sorted(cloud.environment_storages(group.name, doc["environment"]))
    except AcaGpuError as exc:
        doc["storages"], doc["error"] = None, doc.get("error") or exc.message
    runs: list[dict[str, Any]] = []
    total: float | None = 0.0
    for run_group in run_groups(cloud, name):
        spent = run_spend(cloud, run_from_group(run_group), now)
        runs.append(
            {"run_id": run_group.tags.get(naming.TAG_RUN_ID), "phase": spent.phase, **spent.as_dict()}
        )
        total = None if total is None or spent.usd is None else total + spent.usd
    idle = doc.get("idle_cost") or {}
    if doc.get("storages") and idle.get("basis"):  # `run --create-share`: Azure Files bills what it stores
        idle["basis"] += (
            f"; storage(s) {', '.join(doc['storages'])} bill per GB stored (Azure Files; not in this figure)"
        )
    doc["spend"] = {
        "runs": runs,
        "runs_usd_estimate": None if total is None else round(total, 4),
        "idle_usd_per_hour": idle.get("usd_per_hour"),
        "basis": "runs inside now: replica lifetimes so far (as `acagpu status`); idle: the environment's "
        "own profiles",
    }
    return doc


def human_ttl(seconds: int | None) -> str:
    if not seconds:
        return "none"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render(doc: dict[str, Any]) -> str:
    """The detail view: one fact a line."""
    profiles = [f"{p['name']} ({p['type']})" for p in doc.get("profiles", []) if p["type"] != "Consumption"]
    spend = doc.get("spend") or {}
    runs = spend.get("runs") or []
    inside = (
        ", ".join(
            f"{r['run_id']} ({r['phase']}, "
            + ("spend unknown" if r.get("usd_estimate") is None else f"{usd_text(r['usd_estimate'])} so far")
            + ")"
            for r in runs
        )
        or "none"
    )
    pieces = [r["run_id"] for r in doc.get("runs", []) if r["run_id"] not in {x["run_id"] for x in runs}]
    if pieces:
        inside += f"; in the environment's own group: {', '.join(pieces)}"
    idle = doc.get("idle_cost") or {}
    total = spend.get("runs_usd_estimate")
    storages = doc.get("storages")
    replicas = doc.get("replicas_running")
    idle_text = lifecycle.idle_text(idle)
    lines = [
        f"environment {doc['name']}: {doc['environment']} in {doc['resource_group']}",
        f"  state          {doc['state']}" + ("  (expired)" if doc.get("expired") else ""),
        f"  region         {doc['location']}",
        f"  GPU profiles   {', '.join(profiles) or 'none'}",
        f"  storages       {', '.join(storages) if storages else 'none' if storages == [] else 'unknown'}",
        f"  runs inside    {inside}",
        f"  replicas       {'?' if replicas is None else replicas} running",
        f"  idle TTL       {human_ttl(doc.get('idle_ttl_seconds'))} (last used {doc.get('last_used')}, "
        f"expires {doc.get('expires_at')})",
        "  spend          "
        + idle_text
        + "; runs inside so far: "
        + ("unknown" if total is None else usd_text(total))
        + " (estimate)",
        f"  owner          {doc.get('owner')}, created {doc.get('created_at')}",
    ]
    if idle.get("basis"):
        lines.append(f"  idle cost      {idle['basis']}")
    for item in (doc.get("staged") or {}).get("images") or []:  # docs/staging.md
        size = f", {item['bytes'] / 1e9:.2f} GB" if item.get("bytes") else ""
        digest = f", {item['digest'][:19]}…" if item.get("digest") else ""
        streamed = ", streaming artifact" if item.get("streaming") == "converted" else ""
        lines.append(f"  staged         {item['image']} -> {item['staged_as']}{size}{digest}{streamed}")
    if doc.get("error"):
        lines.append(f"  error          {doc['error']}")
    return "\n".join(lines)
