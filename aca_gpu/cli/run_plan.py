"""The plan of `acagpu run` in words, as `--dry-run` prints it and the `--yes` question shows it.

Its own module because both `run` and its fan-out branch (`fanout_cmd.py`) print it.
"""

from __future__ import annotations

from typing import Any


def render_run_plan(doc: dict[str, Any]) -> str:
    work, price = doc["workload"], doc["price"]
    command = " ".join(work["command"]) or "(the image's default command)"
    lines = [
        f"plan for run {doc['run_id']} (dry run: nothing is created)",
        f"  runtime        {doc['runtime']}",
    ]
    if doc["runtime"] == "aca":
        res, prof = doc["resources"], doc["profile"]
        if doc.get("env"):
            lines.append(f"  warm env       {doc['env']} (only the run's job is created and removed)")
        lines += [
            f"  location       {doc['location']}",
            f"  profile        {prof['type']} ({prof['gpu']})",
            f"  resource group {res['resource_group']}",
            f"  environment    {res['environment']}",
            f"  job            {res['job']}",
        ]
    else:
        lines.append(f"  container      {doc['container']} (--gpus {doc['gpus']})")
    lines += [
        f"  image          {work['image']}",
        f"  command        {command}",
        f"  size           {work['cpu']:g} vCPU, {work['memory']}"
        if work["cpu"] is not None
        else f"  size           {work.get('size')}",
    ]
    if work["env"]:
        lines.append(f"  env            {', '.join(sorted(work['env']))}")
    if work["secret_env"]:
        lines.append(f"  secrets        {', '.join(work['secret_env'])} (values never shown)")
    if work["registry"]:
        reg = work["registry"]
        how = f"identity {reg['identity']}" if reg["identity"] else f"user {reg['username']}"
        lines.append(f"  registry       {reg['server']} ({how})")
    for mount in work.get("mounts", []):
        ro = " (read-only)" if mount["read_only"] else ""
        lines.append(f"  mount          {mount['source']} at {mount['path']}{ro}")
    made = doc.get("create_share")
    if made:
        account = made["storage_account"] or "acagpu<env><hash> (named from the subscription)"
        names = ", ".join(s["name"] for s in made["shares"])
        lines.append(
            f"  create share   if missing: storage account {account} (Standard_LRS) in "
            f"{made['resource_group']}, file share and environment storage {names}; kept with the environment"
        )
    lines.append(f"  max minutes    {doc['max_minutes']}")
    if doc["runtime"] == "aca":
        lines.append(
            f"  price          ${price['usd_per_second']:.7f}/s (${price['usd_per_hour']:.2f}/h); "
            f"at most ≈ ${price['ceiling_usd']:.2f} at --max-minutes {doc['max_minutes']} (estimate)"
            + (f"; cap ${price['max_cost_usd']:g} (--max-cost)" if "max_cost_usd" in price else "")
        )
    else:
        lines.append("  price          nothing billed (this machine)")
    lines += [f"  warning: {w}" for w in doc.get("warnings", [])]
    return "\n".join(lines)
