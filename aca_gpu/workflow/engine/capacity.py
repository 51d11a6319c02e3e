"""No capacity is not a timeout: a replica the platform never placed, and what to try next.

ACA says a region has no room for a GPU replica only through the replica's record ("WorkLoad
Profile Full" with HTTP 504 on the create, #1705; a scheduler's "0/4 nodes are available", #1529)
and the system events; the execution then waits until its replica timeout ends it. A wait that ends
that way, with that evidence seen at any poll, is exit 3 (quota or capacity) quoting the platform,
not exit 4: nothing was slow, nothing could be placed. The hint names only flags the command has
(`up` has `--regions` and `--gpu a100,t4`; `up --env` runs where its environment is).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aca_gpu.errors import AcaGpuError, QuotaError
from aca_gpu.workflow.engine.plan import Plan

CODE = "CapacityUnavailable"
# what ACA's records and events say when a region has no room for a replica
# (microsoft/azure-container-apps#1705: "WorkLoad Profile Full"); matched case-insensitively anywhere in
# a replica's details or an event
EVIDENCE = re.compile(
    r"workload ?profile ?full|not enough capacity|insufficient capacity|capacity is not available"
    r"|\b\d+/\d+ nodes are available",
    re.I,
)
# the tail the Azure layer's quota hints carry, which not every command can follow
REGIONS_TAIL = re.compile(r",? or try other regions with --regions\s*$")


def evidence(texts: Iterable[str]) -> list[str]:
    """The distinct texts (replica details, `Reason: message` events) that say capacity ran out."""
    found: list[str] = []
    for text in texts:
        if text and EVIDENCE.search(text) and text not in found:
            found.append(text)
    return found


def unplaced(what: str, texts: Iterable[str]) -> QuotaError | None:
    """Exit 3 for `what` (e.g. "the probe execution X") never placed, when the platform said why."""
    found = evidence(texts)
    if not found:
        return None
    return QuotaError(
        f"no GPU capacity: {what} was never placed ({'; '.join(found)})",
        code=CODE,
    )


def hint(plan: Plan, error: AcaGpuError) -> str:
    """What to do about a quota or capacity refusal, with only the flags this command has."""
    if error.code == CODE:
        first = "capacity comes back within minutes to hours: try again later"
    else:
        first = REGIONS_TAIL.sub("", error.hint or "request more GPU quota for this region")
    gpu = plan.pairs[0].gpu if plan.pairs else "t4"
    if plan.env is not None:
        where = (
            f"; a run in the warm environment {plan.env} goes where it is ({plan.location}): another "
            f"region needs another environment (`acagpu env create NAME -l REGION --gpu {gpu}`)"
        )
    elif plan.existing:
        where = ""
    elif plan.command == "up":
        where = "; or try other regions with --regions eastus,westus3, or another GPU with --gpu a100,t4"
    elif plan.command in ("run", "validate"):
        where = "; or try other regions with --regions eastus,westus3"
    else:
        where = ""
    return first + where


def with_hints(plan: Plan, errors: Iterable[AcaGpuError | None]) -> None:
    """Give every quota or capacity error of a run the hint its command can follow."""
    for error in errors:
        if isinstance(error, QuotaError):
            error.hint = hint(plan, error)
