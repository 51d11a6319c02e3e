"""Faults on demand, from `/_emulator/faults`, `--faults` or `ACAGPU_EMULATOR_FAULTS`.

Spec: `;`-separated entries `kind[:key=value,...]`, plus `seed=N`. Each fault fires with `rate=`
(probability per opportunity, drawn from one seeded RNG) or for the first `count=` opportunities;
with neither it always fires. `match=` limits a fault to paths (or resource names) containing a
substring, `method=` to one HTTP method, `region=` to one region (`eastus`, `East US`), `profile=`
to workload profile types containing a substring (`T4`, `A100`, `NC24-A100`). Kinds:

- `429` (`retry_after=` seconds, default 1) and `5xx` (`status=` 500|502|503, default 500): ARM calls
  fail before reaching the provider.
- `ws_drop` (`after=` stdout/stderr frames, default 0): the exec websocket closes abruptly.
- `log_drop` (`after=` lines, default 1): the log stream ends early.
- `stuck`: a new replica stays in AssigningReplica (hours-long on ACA, regional:
  microsoft/azure-container-apps#1579, #1228, #1502).
- `quota`: without `limit=`, environment or app creation with a GPU profile fails with "Maximum
  Allowed Cores exceeded" (HTTP 400, code MaxNumberOfGpuCoresExceeded). With `limit=N`, it is the
  subscription's GPU quota for that region and profile instead: the usages by location report N as
  the limit, and an app or job create whose GPUs would take the region past N fails the same way.
  Example: `quota:region=eastus,profile=A100,limit=0`.
- `wpfull`: capacity exhausted, as #1705 reports it: the app create answers HTTP 504
  (GatewayTimeout), the app exists, and its replica stays unplaced with the record
  "WorkLoad Profile Full".
- `nocapacity`: a region without capacity: the revision reports Provisioned/Healthy and its replica
  count, but its replica list stays empty (operators saw 900 s and more); a job's replica stays
  AssigningReplica.
- `until=` (emulated seconds since the emulator started) on any fault: it fires only before then, so
  capacity can come back on schedule: `nocapacity:region=eastus,profile=T4,until=2400;
  nocapacity:region=westus3,profile=T4,until=1500` (eastus has no T4 for 40 emulated minutes,
  westus3 none for 25).
- `slow_create` (`factor=`, default 12 for an app, 1.5 for a profile added to an environment):
  creates take toward the slowest figures seen (T4 app create up to ~12 min).
- `slow_delete` (`factor=`, default 1.67): environment deletes take 15 minutes instead of 9.
- `tty_echo`: exec sessions echo stdin and use CRLF, as a TTY would.
- `stall` (`seconds=` emulated, default 1500): a replica stalls between "Successfully pulled image"
  and "Created container" and is billed for it, as A100 job users reported since 2026-06
  (25 minutes, intermittent); its Cost Management usage starts at the pull.
- `pull` (`error=` notfound | denied | unreachable | ratelimit, default notfound): a replica's
  image cannot be pulled; `match=` is a substring of the image reference. Each attempt ends as
  ACA's system log shows it: a ContainerTerminated event "... terminated with exit code '' and
  reason 'ImagePullFailure'. Pull image: IMAGE failed with exit code: 1, error: ..." (the
  registry's text for `error=`), and the replica waits in ImagePullBackOff before the next pull;
  every failed pull counts against a job's replicaRetryLimit, so the execution then fails
  (BackoffLimitExceeded) with no container exit code. Nothing is billed: no container ran.
- `cost_delay` (`seconds=` emulated, default 28800): Cost Management shows usage only this long
  after it happened (Azure: 8 to 24 hours); without it the emulator shows usage at once.
- `apiversion` (`version=` an api-version): ARM refuses requests naming that version with HTTP 400
  NoRegisteredProviderFound, as a region does while a new version rolls out (Azure/azure-cli#28368, #32181).
- `deny` (`action=`, an RBAC action or glob, e.g. `Microsoft.Authorization/roleAssignments/write`):
  the emulator's own credentials lose that action (their permissions list it under notActions and
  ARM answers 403 AuthorizationFailed), to try a caller who may not assign roles. With
  `permissions=hidden` the subscription-scope permission listing answers 404, as for a route ARM
  does not serve, so a client must find out from the refusal itself. With `subscription=` only that
  emulated subscription denies (the others still allow).
- `throttle` (`op=` deletes|writes|reads, default deletes; `refill=` tokens per emulated second,
  `burst=` bucket size, defaults ARM's 10 and 200 for writes and deletes, 25 and 250 for reads;
  `start=` tokens at first use): ARM's per-subscription token bucket (throttle.py). Every answer
  carries `x-ms-ratelimit-remaining-subscription-<op>`; an empty bucket answers 429
  SubscriptionRequestsThrottled with `Retry-After` (whole seconds) and `retry-after-ms`.

- `gpu` (`health=` ecc | remap | pcie | throttle, `+` joins several; default ecc): a replica's
  simulated GPUs are unhealthy as `nvidia-smi -q` shows it: `ecc` 2 volatile DRAM uncorrectable
  errors (failed), `remap` a row remapping failure (failed), `pcie` a link trained to x8 of x16
  (degraded), `throttle` HW Slowdown and HW Thermal Slowdown active at a low clock (degraded).
  Every replica started while it fires is affected; `match=` picks replicas by name.

- Fan-out's platform failures (placement.py), drawn per job replica (per execution for `unknown`),
  so `rate=` with `seed=` scatters them over a fan-out: `backoff` ends the execution
  Failed/BackoffLimitExceeded when its placement comes due, before any pull; `pull_stall`
  (`seconds=`, default 86400) holds the replica in PullingImage that long; `lost` (`after=` seconds
  of running, default 30) kills the running container and ends the execution Degraded, reason
  ReplicaLost, without an exit code; `unknown` and `processing` (`seconds=`, default 60) make a new
  execution read status Unknown or Processing that long before Running. `stuck` (above) is the
  placement that never happens. Example:
  `stuck:rate=0.02;backoff:rate=0.02;pull_stall:rate=0.01;lost:rate=0.01;seed=7`.

- `linger` (`seconds=` emulated, default 0): a finished job replica (and its console log) stays
  listed this long instead of the default 5 s (which has no wall-clock floor under this fault): with
  0 it goes at the tick its container exits, the worst case a log follower must survive (how long
  Azure keeps it is UNCONFIRMED).

- `cpu_fallback`: a served app's replica (an app with external ingress) answers, but its model
  loaded on the CPU: its simulated GPU shows the idle memory figure instead of a served model's
  (30% of the card, UNCONFIRMED), so `serve` says the GPU was left idle; `match=` picks replicas.

- `oom`: a served app's replica (external ingress) has its container killed for memory at its first
  tick running: a ContainerTerminated event "... terminated with exit code '137' and reason
  'OOMKilled'" (Warning; the wording is UNCONFIRMED for ACA), then the restart back-off, again and
  again. `pull_stall` (above) also holds a served app's replica in PullingImage.

- `probe` (`status=` an HTTP status; without it the connection is refused): a served app's replica
  never passes its startup probe, whatever its process answers. Each look of the probe (the first
  after `initialDelaySeconds`, then every `periodSeconds`, in wall seconds) writes a Warning
  ReplicaUnhealthy event "startup probe failed: connection refused" (or "... HTTP probe failed with
  statuscode: N"); after `failureThreshold` failed looks a StoppingContainer event "Container NAME
  failed startup probe, will be restarted", and the container restarts after the back-off (the
  events microsoft/azure-container-apps#1561 shows). Its revision reads healthState Unhealthy.

- `conversion`: an ACR artifact-streaming conversion requested on an emulated registry's data
  plane ends `Failed` when it would have succeeded (providers/registry/streaming.py).

- Event jobs' known platform behaviours (providers/app/keda.py), `match=` a job name:
  `event_cap` (`limit=`, default 10): KEDA keeps at most that many executions of an Event job
  running whatever its maxExecutions (microsoft/azure-container-apps#1216: 10-12 at once with a
  maximum of 100); `empty_poll`: a poll that finds the queue empty, once it has held messages,
  starts one execution anyway (#1125: every poll), which finds nothing and exits; `idle_replica`
  (`rate=`/`count=`): an execution KEDA starts runs a container that never takes a message (#1656)
  and holds its place among the running until its replicaTimeout or its job's delete.
- The Storage queue data plane (dataplane/queues.py), `match=` a substring of `/_queue/{account}/
  {rest}`, `method=`: `queue_busy` (`status=` 503 | 500 | 429, default 503) answers before Azurite
  sees the request (503 ServerBusy, Azure Storage's throttling answer; 500 InternalError; 429 is
  this emulator's, Storage documents 503); `queue_reset` (`when=` before | after, default before)
  drops the connection without an answer, before Azurite sees the request or after it acted on
  it (a receive whose messages stay invisible, a put that was stored, a delete that was done).

Durations (timing.py, emulated seconds, scaled by the time scale): environment create 80, an added
GPU profile 490, environment delete 540 (900 with `slow_delete`), GPU app create 60 typical (720
with `slow_create`).
Example: `429:count=2,retry_after=1;ws_drop:rate=0.5;stuck:region=westus3;seed=7`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

KINDS = (
    "429",
    "5xx",
    "ws_drop",
    "log_drop",
    "stuck",
    "quota",
    "wpfull",
    "nocapacity",
    "slow_create",
    "slow_delete",
    "tty_echo",
    "apiversion",
    "deny",
    "throttle",
    "gpu",
    "cpu_fallback",
    "oom",
    "probe",
    "stall",
    "cost_delay",
    "pull",
    "backoff",
    "pull_stall",
    "lost",
    "unknown",
    "processing",
    "linger",
    "conversion",
    "event_cap",
    "empty_poll",
    "idle_replica",
    "queue_busy",
    "queue_reset",
)

# what a registry answers for each `pull:error=` (containerd's wording, as ACA's log relays it)
PULL_ERRORS = {
    "notfound": 'failed to resolve reference "{image}": {image}: not found: manifest unknown',
    "denied": 'failed to resolve reference "{image}": pull access denied, repository does not exist '
    "or may require authorization: authorization failed: unauthorized: authentication required",
    "unreachable": 'failed to resolve reference "{image}": failed to do request: Head '
    '"https://{host}/v2/": dial tcp: lookup {host}: no such host',
    "ratelimit": 'failed to copy: httpReadSeeker: failed open: unexpected status code "{image}": '
    "429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit",
}


GPU_HEALTH_FAULTS = ("ecc", "remap", "pcie", "throttle")


def region_key(location: str) -> str:
    """`East US` and `eastus` name the same region."""
    return location.replace(" ", "").lower()


class FaultSpecError(ValueError):
    """The fault spec does not parse."""


@dataclass
class Fault:
    kind: str
    rate: float | None = None
    count: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    fired: int = 0

    def param(self, key: str, default: str) -> str:
        return self.params.get(key, default)


def parse(spec: str) -> tuple[list[Fault], int]:
    faults: list[Fault] = []
    seed = 0
    for raw in spec.replace("\n", ";").split(";"):
        entry = raw.strip()
        if not entry:
            continue
        if entry.startswith("seed="):
            try:
                seed = int(entry[5:])
            except ValueError as exc:
                raise FaultSpecError(f"bad seed in {entry!r}") from exc
            continue
        kind, _, rest = entry.partition(":")
        kind = kind.strip()
        if kind not in KINDS:
            raise FaultSpecError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
        fault = Fault(kind)
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise FaultSpecError(f"expected key=value in {entry!r}")
            try:
                if key == "rate":
                    fault.rate = float(value)
                elif key == "count":
                    fault.count = int(value)
                elif key in (
                    "limit",
                    "factor",
                    "after",
                    "retry_after",
                    "status",
                    "seconds",
                    "refill",
                    "burst",
                    "start",
                    "until",
                ):
                    int(value) if key == "limit" else float(value)
                    fault.params[key] = value
                else:
                    fault.params[key] = value
            except ValueError as exc:
                raise FaultSpecError(f"bad number in {entry!r}") from exc
        if kind == "pull" and fault.param("error", "notfound") not in PULL_ERRORS:
            raise FaultSpecError(
                f"unknown pull error {fault.param('error', '')!r}; known: {', '.join(PULL_ERRORS)}"
            )
        if kind == "gpu":
            bad = [k for k in fault.param("health", "ecc").split("+") if k not in GPU_HEALTH_FAULTS]
            if bad:
                raise FaultSpecError(
                    f"unknown gpu health {'+'.join(bad)!r}; known: {', '.join(GPU_HEALTH_FAULTS)}"
                )
        faults.append(fault)
    return faults, seed


class Faults:
    """The active faults; `fire(kind)` says whether this opportunity fails (and consumes a count)."""

    def __init__(self, spec: str | None = None) -> None:
        self.spec = ""
        # emulated seconds since the emulator started (the server sets it from its clock): `until=`
        self.elapsed: Callable[[], float] = lambda: 0.0
        self._faults: list[Fault] = []
        self._rng = random.Random(0)
        if spec:
            self.set(spec)

    def set(self, spec: str) -> None:
        faults, seed = parse(spec)
        self.spec = spec
        self._faults = faults
        self._rng = random.Random(seed)

    def clear(self) -> None:
        self.set("")

    def all(self, kind: str) -> list[Fault]:
        return [f for f in self._faults if f.kind == kind]

    def active(self, kind: str) -> Fault | None:
        return next((f for f in self._faults if f.kind == kind), None)

    def _applies(self, fault: Fault, path: str, method: str, location: str, profile: str) -> bool:
        p = fault.params
        if "match" in p and p["match"].lower() not in path.lower():
            return False
        if "method" in p and p["method"].upper() != method.upper():
            return False
        if "region" in p and region_key(p["region"]) != region_key(location):
            return False
        if "until" in p and self.elapsed() >= float(p["until"]):
            return False
        return not ("profile" in p and p["profile"].lower() not in profile.lower())

    def standing(self, kind: str, *, path: str = "") -> Fault | None:
        """The first fault of `kind` that applies here, as a standing rule (no rate or count drawn)."""
        return next((f for f in self.all(kind) if self._applies(f, path, "", "", "")), None)

    def quota_limit(self, location: str, profile_type: str) -> int | None:
        """The GPU quota a `quota:limit=N` fault sets for this region and profile, if any."""
        for fault in self._faults:
            if (
                fault.kind == "quota"
                and "limit" in fault.params
                and self._applies(fault, "", "", location, profile_type)
            ):
                return int(fault.params["limit"])
        return None

    def fire(
        self, kind: str, *, path: str = "", method: str = "", location: str = "", profile: str = ""
    ) -> Fault | None:
        for fault in self._faults:
            if fault.kind != kind:
                continue
            if kind == "quota" and "limit" in fault.params:
                continue  # a quota limit is a standing rule (quota_limit), not a one-off failure
            if not self._applies(fault, path, method, location, profile):
                continue
            if fault.count is not None:
                if fault.fired >= fault.count:
                    continue
            elif fault.rate is not None and self._rng.random() >= fault.rate:
                continue
            fault.fired += 1
            return fault
        return None

    def describe(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "faults": [
                {"kind": f.kind, "rate": f.rate, "count": f.count, "params": f.params, "fired": f.fired}
                for f in self._faults
            ],
        }


def probe_fault_text(fault: Fault) -> str:
    """Why each look of a `probe` fault's startup probe fails, in the words of its event."""
    status = fault.params.get("status")
    return f"HTTP probe failed with statuscode: {int(float(status))}" if status else "connection refused"


def pull_error(fault: Fault, image: str) -> str:
    """The registry's text for a `pull` fault's `error=`, about this image (its registry's host)."""
    return pull_error_text(fault.param("error", "notfound"), image)


def pull_error_text(kind: str, image: str) -> str:
    """PULL_ERRORS[kind] about this image: a fault's, or a missing image's (pulls.py)."""
    first = image.split("/", 1)[0]
    named = "/" in image and ("." in first or ":" in first) and first != "docker.io"
    host = first if named else "registry-1.docker.io"
    return PULL_ERRORS[kind].format(image=image, host=host)
