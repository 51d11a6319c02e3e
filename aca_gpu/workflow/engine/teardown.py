"""The only delete-and-verify path (up, validate, local's ACA twin, down, reap): billing stops first.

0. A served app (the group's `acagpu:served` tag names it) is scaled to 0 replicas first (min and
   max 0): its replicas stop billing at that update, whatever its delete then does.
1. The GPU apps and jobs of the group are deleted and verified gone: from then on nothing bills
   (on a serverless GPU profile; a dedicated profile's node bills until the environment is gone).
2. The group delete is accepted. With `wait_gone` (or a dedicated profile) the group is read back
   until ARM answers 404; otherwise the command returns and the group is reported `deleting`.

A failure in one step never stops the next: teardown keeps deleting and reports what is true.
The `acagpu:managed=true` check is repeated in the Azure layer right before every delete.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, TypeVar

from aca_gpu import naming
from aca_gpu.errors import AcaGpuError, NotFound, PreflightRefused, is_throttled
from aca_gpu.models import Cloud
from aca_gpu.workflow.base.threads import spawn

T = TypeVar("T")

BILLING_DEADLINE_S = 15 * 60.0  # app and job deletes: ~20-30 s each on Azure (operators' notes, not public)
GONE_DEADLINE_S = 45 * 60.0  # group delete: environment deletes alone take 9-15 minutes
CALL_ATTEMPTS = 3
THROTTLED_DEADLINE_S = 60 * 60.0  # a throttled call is sent again for this long, never counted as a try
ABSENT_CONFIRMATIONS = 4  # every caller has just seen (or made) the group: one 404 is not enough
POLL_S = 5.0
# A round of deletes waits this many polls for their operations (40 s at the default 5 s, beyond
# an app or job delete's 20-30 s on Azure); then the group is listed again, so a delete whose
# operation does not end (its name taken again by a create that landed after it) holds no teardown.
ROUND_POLLS = 8


@dataclass(frozen=True)
class TeardownResult:
    """What is left of a run: `deleted` (404 seen), `deleting` (billing stopped, the group is going),
    `absent`, `kept`, `attached` (an existing run we only used), `nothing-created`, `left` (a second
    Ctrl-C), `incomplete` (something billable may remain), `detached` (a queue run left to its
    workers on purpose: `acagpu down --run-id` or the run's TTL removes it)."""

    status: str
    verified: bool = False  # the group's 404 was seen
    billing_stopped: bool = False
    message: str | None = None

    CLEAN = frozenset({"deleted", "deleting", "absent", "kept", "attached", "nothing-created", "detached"})

    @property
    def clean(self) -> bool:
        return self.status in self.CLEAN and (self.status != "deleting" or self.billing_stopped)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "verified": self.verified,
            "billing_stopped": self.billing_stopped,
        }
        if self.message:
            doc["message"] = self.message
        return doc


def _attempt(call: Callable[[], T], errors: list[str], what: str, pause: float) -> T | None:
    """`call()` with a few tries: a transient failure must not leave a billing replica behind.

    A throttled call (429 even after azure-core's own waits) does not use up a try: ARM refused the
    rate, not the request, so it is sent again, however often, until THROTTLED_DEADLINE_S."""
    attempt, patience_ends = 1, time.monotonic() + THROTTLED_DEADLINE_S
    while True:
        try:
            return call()
        except PreflightRefused:
            raise
        except AcaGpuError as exc:
            if is_throttled(exc) and time.monotonic() < patience_ends:
                time.sleep(pause)
                continue
            if attempt >= CALL_ATTEMPTS:
                errors.append(f"{what}: {exc.message}")
                return None
            time.sleep(pause * attempt)
            attempt += 1


def _parallel(calls: list[Callable[[], None]], timeout: float) -> None:
    """Deletes run side by side in daemon threads, waited for at most `timeout` (in short slices, so
    a signal handler runs between them): a hung call must not hold the prompt, nor the teardown."""
    end = time.monotonic() + timeout
    pending = {spawn(c, "acagpu-teardown") for c in calls}
    while pending and time.monotonic() < end:
        pending = wait_futures(pending, timeout=min(0.25, max(0.0, end - time.monotonic())))[1]


def teardown_group(
    cloud: Cloud,
    name: str,
    *,
    wait_gone: bool = True,
    dedicated: bool = False,
    poll: float = POLL_S,
    billing_deadline: float | None = None,
    gone_deadline: float | None = None,
    on_deleted: Callable[[str], None] | None = None,
    keep_group: bool = False,
) -> TeardownResult:
    """Remove one managed resource group, billing first (see the module doc). Never raises for cloud
    failures, except PreflightRefused for a group acagpu does not own. `on_deleted(name)` runs as
    ARM accepts the delete of an app or job: the moment its replicas stop billing. `keep_group`
    stops after step 1 (`parked`: a place a wait for capacity keeps empty, engine/parking.py)."""
    billing_deadline = BILLING_DEADLINE_S if billing_deadline is None else billing_deadline
    gone_deadline = GONE_DEADLINE_S if gone_deadline is None else gone_deadline
    errors: list[str] = []
    group = _attempt(lambda: cloud.get_resource_group(name), errors, f"read {name}", poll)
    for _ in range(ABSENT_CONFIRMATIONS):  # ARM can answer 404 for a moment right after the PUT
        if group is not None or errors:
            break
        time.sleep(min(poll, 2.0))
        group = _attempt(lambda: cloud.get_resource_group(name), errors, f"read {name}", poll)
    if group is None and not errors:
        return TeardownResult("absent", verified=True, billing_stopped=True)
    if group is not None and not naming.is_managed(dict(group.tags)):
        raise PreflightRefused(
            f"resource group {name!r} is not tagged {naming.TAG_MANAGED}=true; acagpu never deletes it"
        )
    served = dict(group.tags).get(naming.TAG_SERVED) if group is not None else None
    if served:
        _scale_in(cloud, name, served, poll)
    billing_stopped = _stop_billing(
        cloud, name, errors, poll=poll, deadline=billing_deadline, on_deleted=on_deleted
    )
    if keep_group:
        return TeardownResult("parked", billing_stopped=billing_stopped, message="; ".join(errors) or None)

    def accept() -> bool:
        cloud.delete_resource_group(name, wait=False)
        return True

    accepted = _attempt(accept, errors, f"delete {name}", poll)
    if not accepted:
        return TeardownResult("incomplete", billing_stopped=billing_stopped, message="; ".join(errors))
    if not (wait_gone or dedicated):
        status = "deleting" if billing_stopped and not errors else "incomplete"
        return TeardownResult(
            status, billing_stopped=billing_stopped and not dedicated, message="; ".join(errors) or None
        )
    gone = _wait_gone(cloud, name, errors, poll=poll, deadline=gone_deadline)
    if gone:
        return TeardownResult("deleted", verified=True, billing_stopped=True)
    errors.append(f"resource group {name} still exists {gone_deadline:.0f}s after its delete was accepted")
    return TeardownResult(
        "incomplete", billing_stopped=billing_stopped and not dedicated, message="; ".join(errors)
    )


def _scale_in(cloud: Cloud, rg: str, app: str, poll: float) -> None:
    """A served app to min and max replicas 0 before its delete, so billing stops at the update even
    when the delete fails or takes long. Best effort: an app already gone, or an update that fails,
    leaves the delete that follows as the guarantee (its failures are what teardown reports)."""

    def call() -> bool:
        try:
            cloud.scale_app(rg, app, 0, 0)
        except (NotFound, PreflightRefused):  # gone, or its group already deleting
            return False
        return True

    _attempt(call, [], f"scale {app} to zero", poll)


def _stop_billing(
    cloud: Cloud,
    rg: str,
    errors: list[str],
    *,
    poll: float,
    deadline: float,
    on_deleted: Callable[[str], None] | None = None,
) -> bool:
    """Delete every app and job in the group until none is listed; True when none is left.

    Listing again after each round also catches an app or job whose create was still in flight
    when teardown began (Ctrl-C during the pairs), even one made again after its delete was
    accepted: a round waits ROUND_POLLS polls at most for its deletes.
    """
    end = time.monotonic() + deadline
    failures: list[str] = []

    def deleting(delete: Callable[..., None], name: str) -> Callable[[], None]:
        def accepted() -> None:
            if on_deleted is not None:
                on_deleted(name)

        def call() -> None:
            _attempt(lambda: delete(rg, name, on_accepted=accepted), failures, f"delete {name}", poll)

        return call

    while True:
        apps = _attempt(lambda: cloud.list_apps(rg), failures, f"list apps in {rg}", poll)
        jobs = _attempt(lambda: cloud.list_jobs(rg), failures, f"list jobs in {rg}", poll)
        if apps == [] and jobs == []:
            return True
        names = [a.name for a in apps or []] + [j.name for j in jobs or []]
        if time.monotonic() >= end:
            errors.extend(dict.fromkeys(failures))
            errors.append(f"still there after {deadline:.0f}s: {', '.join(names) or 'unknown (cannot list)'}")
            return False
        _parallel(
            [deleting(cloud.delete_app, a.name) for a in apps or []]
            + [deleting(cloud.delete_job, j.name) for j in jobs or []],
            timeout=min(poll * ROUND_POLLS, end - time.monotonic()),
        )
        if apps is None or jobs is None or failures:
            time.sleep(poll)


def _wait_gone(cloud: Cloud, rg: str, errors: list[str], *, poll: float, deadline: float) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if cloud.get_resource_group(rg) is None:
                return True
        except AcaGpuError as exc:  # keep reading: one failed read says nothing about the group
            last = exc.message
            if time.monotonic() + poll >= end:
                errors.append(f"read {rg}: {last}")
        time.sleep(poll)
    return False
