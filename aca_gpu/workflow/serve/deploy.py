"""`acagpu serve`: place (cold, or a warm environment with `--env`) → container app with external
ingress, an HTTP scale rule and a startup probe → the first answer → URL, phases, price per hour.

A served app is a run: its group carries the run's tags (TTL, owner, run id) plus the app's name,
so `down --run-id`, `status`, `reap` and the guard treat it like any run. The place comes from the
engine's runtimes (`AcaRuntime`, `WarmRuntime`: preflight, group, environment, staged images), and
a failure or Ctrl-C before the app answers tears down what this command made, billing first (the
app scaled to zero, then the run's group deleted). Once it answers, the app is kept until its TTL
or `acagpu down --run-id NAME --yes`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from aca_gpu.errors import AcaGpuError, BadInput, Interrupted, NotFound
from aca_gpu.models import AppSpec, Cloud, RegistryCred
from aca_gpu.output import Progress
from aca_gpu.units import duration_text
from aca_gpu.workflow.base.context import Waiter, down_hint
from aca_gpu.workflow.engine import waiting
from aca_gpu.workflow.engine.outcome import TeardownResult
from aca_gpu.workflow.env.warm_runtime import runtime_for
from aca_gpu.workflow.serve import diagnose, http, limits
from aca_gpu.workflow.serve.gpu_use import gpu_use
from aca_gpu.workflow.serve.measure import CUTOFF_STATUSES, Target, cold_request, measure
from aca_gpu.workflow.serve.phases import cycle_phases
from aca_gpu.workflow.serve.plan import ServeSpec
from aca_gpu.workflow.spend import ledger
from aca_gpu.workflow.workload.aca import workload_parts

EXIT_INTERRUPTED = 130


@dataclass
class ServeOutcome:
    """What `serve` did: the app, its URL, the first answer and its phases, a measurement."""

    spec: ServeSpec
    url: str | None = None
    fqdn: str | None = None
    resource_group: str | None = None
    first_answer: dict[str, Any] | None = None
    measurement: dict[str, Any] | None = None
    gpu_use: dict[str, Any] | None = None  # nvidia-smi in a replica once it answered (gpu_use.py)
    teardown: TeardownResult | None = None
    error: AcaGpuError | None = None
    interrupted: bool = False
    attached: bool = False  # `--run-id NAME --measure N`: an app already served, measured only
    notes: list[str] = field(default_factory=list)
    target: Target | None = None  # where the first answer came from (measured after it)
    capacity_wait: dict[str, Any] | None = None  # --wait-for-capacity (serve/limits.py)
    cost_cap: dict[str, Any] | None = None  # --max-cost (serve/limits.py)
    delete: str = ""  # the `down` that removes the app (down_hint: with its --subscription)

    @property
    def status(self) -> str:
        if self.interrupted:
            return "interrupted"
        if self.error is not None:
            return "failed"
        return "measured" if self.measurement is not None else "serving"

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return self.error.exit_code if self.error is not None else 0

    def document(self) -> dict[str, Any]:
        spec = self.spec
        price = spec.run.price()
        doc: dict[str, Any] = {
            "schema": 1,
            "command": "serve",
            "status": self.status,
            "run_id": spec.run_id,
            "app": spec.app,
            "resource_group": self.resource_group,
            "url": self.url,
            "fqdn": self.fqdn,
            "settings": spec.settings(),
            "price": {
                "usd_per_hour": price.get("usd_per_hour"),
                "basis": str(price.get("basis", "")).split("; ceiling")[0],
                "while": "a replica runs; at zero replicas nothing bills",
            },
            "first_answer": self.first_answer,
            "measurement": self.measurement,
            "gpu_use": self.gpu_use,
            "plan": spec.as_dict(),
            "kept": self.status in ("serving", "measured"),
            "delete": self.delete or down_hint(spec.run_id),
            "teardown": self.teardown.as_dict() if self.teardown is not None else None,
            "notes": list(self.notes),
            **({"capacity_wait": self.capacity_wait} if self.capacity_wait is not None else {}),
            **({"cost_cap": self.cost_cap} if self.cost_cap is not None else {}),
            "error": self.error.as_dict() if self.error is not None else None,
            "exit_code": self.exit_code,
        }
        return doc


def cuda_refusal(spec: ServeSpec, plan: Any, progress: Progress) -> AcaGpuError | None:
    """An image whose CUDA (from its tag) the host driver cannot run is refused before anything
    exists (exit 5): the driver is the last one seen for this profile (the platform's GpuDriverInfo
    event, or nvidia-smi; else the bundled sighting), named with where it came from. An image
    whose tag says nothing of CUDA passes: the replica's own event is then the first word."""
    from aca_gpu.errors import ContainerRefused
    from aca_gpu.gpu import cuda_compat
    from aca_gpu.gpu.image_ref import parse_image_ref
    from aca_gpu.workflow.preflight import drivers

    image = spec.run.workload.image
    profile = plan.pairs[0].profile
    driver, source = drivers.known_driver(profile.type, plan.location)
    try:
        found = cuda_compat.verdict(parse_image_ref(image), driver)
    except AcaGpuError:  # a reference the judge cannot read: the platform will say
        return None
    with progress.step("image's CUDA vs the host driver") as step:
        step.update(f"{image}: {found.verdict} with driver {driver} ({source})")
        if found.ok:
            return None
        step.status = "fail"
    return ContainerRefused(
        f"host driver {driver} cannot run {image}: {found.reason} (driver: {source})",
        code="CudaIncompatible",
        hint=f"use an image built for CUDA {found.max_cuda or 'an older version'} or older; "
        "`acagpu compat IMAGE` judges an image against the driver; nothing was created",
    )


def mount_refusal(spec: ServeSpec, runtime: Any) -> AcaGpuError | None:
    """Every --mount names a storage of the warm environment (checked before anything exists, exit
    2), as `run` checks it."""
    from aca_gpu.errors import PreflightRefused

    wanted = [m.source for m in spec.run.workload.mounts]
    if not wanted:
        return None
    group, place = getattr(runtime, "group", None), getattr(runtime, "place", None)
    if group is None or place is None:  # parse_mounts refuses --mount without --env before this
        return BadInput("--mount on ACA needs --env NAME: a run-scoped environment has no storage")
    have = runtime.cloud.environment_storages(group.name, place.name)
    missing = sorted(set(wanted) - set(have))
    if not missing:
        return None
    return PreflightRefused(
        f"environment {place.name} has no storage {', '.join(missing)} "
        f"(it has: {', '.join(sorted(have)) or 'none'})",
        code="StorageNotFound",
        hint="`acagpu run --env NAME --mount SHARE:/path --create-share` makes one, or add your own "
        "share (`az containerapp env storage set`)",
    )


def served_spec(spec: ServeSpec, runtime: Any, where: Any) -> Any:
    """The app's ARM spec: the container (a staged copy's name where the environment has one),
    `-e` values, `--secret-env` values as app secrets that env vars reference, the pull's identity."""
    from aca_gpu.azure.served import ServedAppSpec

    work = spec.run.workload
    image = runtime._deployed(work.image) if hasattr(runtime, "_deployed") else work.image
    registries: tuple[RegistryCred, ...] = (
        runtime._registries(image) if hasattr(runtime, "_registries") else ()
    )
    container, secrets, registries = workload_parts(work, image, registries)
    app = AppSpec(
        resource_group=where.resource_group,
        name=spec.app,
        location=where.location,
        environment_id=where.environment_id,
        workload_profile_name=where.profile_name,
        container=container,
        tags=dict(where.tags),
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )
    return ServedAppSpec(
        app=app,
        port=spec.port,
        concurrency=spec.concurrency,
        cooldown_s=spec.cooldown_s,
        health_path=spec.health,
        load_timeout_s=spec.load_timeout_s,
        secrets=secrets,
        registries=registries,
        volumes=tuple((f"share-{i}", m.source) for i, m in enumerate(work.mounts, start=1)),
    )


def clients_of(cloud: Cloud) -> Any:
    found = getattr(cloud, "clients", None)
    if found is None:
        raise BadInput("serving needs Azure (or the emulator): this cloud has no ARM clients")
    return found


def target_of(spec: ServeSpec, rg: str, url: str, location: str, verify: str | bool) -> Target:
    return Target(
        resource_group=rg,
        app=spec.app,
        url=url,
        health=spec.health,
        cooldown_s=spec.cooldown_s,
        load_timeout_s=float(spec.run.plan.start_timeout_s + spec.load_timeout_s),
        usd_per_hour=float(spec.run.price().get("usd_per_hour") or 0.0),
        location=location,
        verify=verify,
    )


def revision_replicas(cloud: Cloud, target: Target) -> int | None:
    """How many replicas the app's latest revision counts (None when unread)."""
    from aca_gpu.azure import served

    found = served.revision_health(clients_of(cloud), target.resource_group, target.app)
    return int(found["replicas"]) if found is not None else None


def with_revision_health(cloud: Cloud, target: Target, found: AcaGpuError) -> AcaGpuError:
    """A probe that never passed names its revision's health as ARM reports it (best effort)."""
    from aca_gpu.azure import served

    if found.code != "ProbeFailed":
        return found
    try:
        health = served.revision_health(clients_of(cloud), target.resource_group, target.app)
    except AcaGpuError:
        return found
    if health is not None:
        found.message += (
            f"; revision {health['revision']}: healthState {health['health_state']}, "
            f"runningState {health['running_state']}"
        )
    return found


def first_answer(
    cloud: Cloud, target: Target, waiter: Waiter, progress: Progress, since: float, probe: str = ""
) -> dict[str, Any]:
    """Wait for the app's first answer (saying what it waits for), with its phases since `since`.
    `probe`: the startup probe in words (diagnose.probe_text), for a probe that never passes."""
    with progress.step("first answer") as step:
        step.update(
            f"GET {target.url}{target.health}: waiting for a replica to be placed, pull the image, "
            f"start and answer (up to {duration_text(target.load_timeout_s)})"
        )
        look = min(diagnose.LOOK_S, max(0.2, waiter.interval * 10))
        watch = diagnose.Watch(
            cloud,
            target.resource_group,
            target.app,
            look_s=look,
            probe=probe,
            counted=lambda: revision_replicas(cloud, target),
            on_wait=lambda text: step.update(f"GET {target.url}{target.health}: {text}"),
            on_warn=progress.warn,
        ).start()
        try:
            attempts, end = cold_request(target, lambda: waiter.cancel.is_set() or watch.found is not None)
        finally:
            watch.stop.set()
        if waiter.cancel.is_set():
            raise KeyboardInterrupt
        last = attempts[-1]
        if watch.found is not None and not last.ok:  # waiting longer cannot help (diagnose.py)
            step.status = "fail"
            raise with_revision_health(cloud, target, watch.found)
        if not last.ok:
            step.status = "fail"
            events = cloud.system_events(target.resource_group, app=target.app, tail=diagnose.EVENTS_TAIL)
            raise with_revision_health(
                cloud,
                target,
                diagnose.after_timeout(
                    target.app,
                    target.health,
                    events,
                    f"{duration_text(target.load_timeout_s)} (last: {last.status or last.error})",
                    probe,
                ),
            )
        first_byte = last.sent + last.first_byte_s if last.first_byte_s is not None else None
        events = cloud.system_events(target.resource_group, app=target.app, tail=200)
        doc = cycle_phases(events, target.app, sent=since, first_byte=first_byte, end=end)
        doc.update(status=last.status, attempts=len(attempts))
        doc["cut_off_attempts"] = sum(1 for a in attempts if a.status in CUTOFF_STATUSES)
        step.update(f"{last.status} after {duration_text(doc['end_to_end_s'])} ({len(attempts)} request(s))")
        return doc


def _teardown(runtime: Any, spec: ServeSpec, plan: Any, progress: Progress) -> TeardownResult:
    """Billing first: the one teardown path scales the app to zero (its group names it), then
    deletes it and the run's place."""
    progress.note(f"tearing down {spec.app}: scaled to 0 replicas first (billing stops), then deleted")
    ledger.record_served_group(runtime.cloud, plan.names.resource_group)  # for `acagpu cost`
    result: TeardownResult = runtime.remove_place(plan, progress)
    return result


def _teardown_unless_interrupted(
    outcome: ServeOutcome,
    runtime: Any,
    spec: ServeSpec,
    plan: Any,
    progress: Progress,
    *,
    interrupted: bool = False,
) -> None:
    """Teardown; a Ctrl-C during it leaves the rest in place and says the one command that removes
    it (the deletes already sent go on in the platform)."""
    try:
        if interrupted:
            progress.warn(f"interrupted: tearing down run {spec.run_id}; Ctrl-C again to leave it in place")
        outcome.teardown = _teardown(runtime, spec, plan, progress)
    except KeyboardInterrupt:
        delete = outcome.delete or down_hint(spec.run_id)
        outcome.interrupted = True
        outcome.teardown = TeardownResult("left", message=f"Ctrl-C during teardown: `{delete}` removes it")
        outcome.error = Interrupted(
            f"interrupted during teardown: run {spec.run_id} is left as it was (its app may still bill)",
            hint=f"{delete} removes it",
        )
        progress.warn(f"teardown stopped: run {spec.run_id} is left in place; {delete} removes it")


def _deploy(
    cloud: Cloud, clients: Any, spec: ServeSpec, runtime: Any, where: Any, outcome: ServeOutcome,
    progress: Progress, waiter: Waiter, verify: str | bool,
) -> None:  # fmt: skip
    """The app made (or found after a 504, #1705), its first answer, the GPU it uses."""
    from aca_gpu.azure import served

    since = time.time()
    with progress.step("container app") as step:
        step.update(
            f"{spec.app}: external ingress on port {spec.port}, "
            f"{spec.min_replicas}-{spec.max_replicas} replicas"
        )
        try:
            info = served.create_served_app(clients, served_spec(spec, runtime, where))
        except AcaGpuError as exc:  # a 504 while the app was made (#1705: a full profile)
            found = served.read_served(clients, where.resource_group, spec.app)
            if exc.code != "GatewayTimeout" or found is None:
                raise
            info = found
            progress.warn(f"creating {spec.app} answered {exc.code}, but the app exists: watching it")
        if not info.fqdn:
            raise NotFound(f"container app {spec.app} has no ingress FQDN", code="NoIngress")
        outcome.fqdn = info.fqdn
        outcome.url = served.url_of(clients, info.fqdn)
        step.update(outcome.url)
    outcome.target = target_of(spec, where.resource_group, outcome.url, where.location, verify)
    probe = diagnose.probe_text(
        served.startup_probe(spec.health, spec.port, spec.load_timeout_s), spec.load_timeout_s
    )
    outcome.first_answer = first_answer(cloud, outcome.target, waiter, progress, since, probe)
    outcome.gpu_use = gpu_use(cloud, where.resource_group, spec.app, waiter, progress)


def serve(
    cloud: Cloud, spec: ServeSpec, progress: Progress, waiter: Waiter, *, verify: str | bool = True
) -> ServeOutcome:
    """Deploy, wait for the first answer, measure when asked (module doc); `--wait-for-capacity` and
    `--max-cost` as serve/limits.py says."""
    plan, runtime = runtime_for(cloud, spec.run.plan, waiter)
    spec = replace(spec, run=replace(spec.run, plan=plan))
    outcome = ServeOutcome(
        spec, resource_group=plan.names.resource_group, delete=down_hint(spec.run_id, cloud)
    )
    clients = clients_of(cloud)
    refused = cuda_refusal(spec, plan, progress) or mount_refusal(spec, runtime)
    if refused is not None:  # nothing exists yet: nothing to tear down
        outcome.error = refused
        return outcome
    cap, wait = (
        plan.spend_cap,
        waiting.CapacityWait(plan.wait_for_capacity_s) if plan.wait_for_capacity_s else None,
    )
    watch: limits.CapWatch | None = None
    try:
        runtime.preflight(plan, progress)
        runtime.create_place(plan, progress, [])
        where = runtime._where(plan, plan.pairs[0])
        outcome.resource_group = where.resource_group
        probe = limits.probe_for(plan, where)
        if cap is not None:
            watch = limits.CapWatch(cloud, where.resource_group, spec.app, cap, waiter.cancel).start()
        while True:
            if wait is not None:
                limits.room(cloud, plan, probe, wait, progress, waiter)
            try:
                _deploy(cloud, clients, spec, runtime, where, outcome, progress, waiter, verify)
                break
            except AcaGpuError as exc:
                if not limits.refused_for_room(exc, wait) or waiter.cancel.is_set():
                    raise
                assert wait is not None
                wait.saw(plan.location, plan.pairs[0].gpu, plan.pairs[0].profile.type, exc)
                progress.warn(f"{exc.message}: {spec.app} goes (billing first) and the wait for room goes on")
                outcome.fqdn = outcome.url = None
                probe = runtime.park_place(plan, progress) or probe
        if spec.measure and outcome.target is not None:
            outcome.measurement = measure(
                cloud, outcome.target, spec.measure, spec.requests, spec.request_concurrency, waiter, progress
            )
    except KeyboardInterrupt:
        waiter.cancel.set()
        if cap is None or not cap.reached:
            outcome.interrupted = True
            outcome.error = Interrupted(
                f"interrupted: what this command made is torn down (billing first); if anything is "
                f"left, {outcome.delete} removes it"
            )
            _teardown_unless_interrupted(outcome, runtime, spec, plan, progress, interrupted=True)
    except AcaGpuError as exc:
        outcome.error = exc
        if outcome.first_answer is None and not (cap is not None and cap.reached):
            waiter.cancel.clear()  # nothing answered yet: nothing worth keeping
            _teardown_unless_interrupted(outcome, runtime, spec, plan, progress)
    finally:
        if watch is not None:
            watch.stop.set()
    if cap is not None and cap.reached and not outcome.interrupted:  # the watch stopped serve: exit 8
        _capped(outcome, cap, runtime, spec, plan, progress, waiter)
    outcome.cost_cap = cap.as_dict() if cap is not None else None
    outcome.capacity_wait = wait.as_dict() if wait is not None else None
    return outcome


def _capped(
    outcome: ServeOutcome, cap: Any, runtime: Any, spec: ServeSpec, plan: Any, progress: Progress,
    waiter: Waiter,
) -> None:  # fmt: skip
    """--max-cost reached while `serve` ran: the app goes billing first (scaled to 0, then deleted)."""
    done = f"{spec.app} answered" if outcome.first_answer else f"{spec.app} was made"
    outcome.error = cap.error(done, "serving it on (the app is scaled to 0 and deleted)", None)
    waiter.cancel.clear()
    _teardown_unless_interrupted(outcome, runtime, spec, plan, progress)


def measure_served(
    cloud: Cloud, spec: ServeSpec, progress: Progress, waiter: Waiter, *, verify: str | bool = True
) -> ServeOutcome:
    """`serve --run-id NAME --measure N`: measure an app already served (nothing is made or deleted)."""
    from aca_gpu.azure import served

    clients = clients_of(cloud)
    rg = spec.run.plan.names.resource_group
    outcome = ServeOutcome(spec, resource_group=rg, attached=True, delete=down_hint(spec.run_id, cloud))
    found = served.read_served(clients, rg, spec.app)
    if found is None or not found.fqdn:
        outcome.error = NotFound(
            f"run {spec.run_id} serves no app ({spec.app} not found in {rg})",
            code="ResourceNotFound",
            hint="`acagpu status` lists runs; `acagpu serve IMAGE --run-id ...` serves one",
        )
        return outcome
    outcome.fqdn = found.fqdn
    outcome.url = served.url_of(clients, found.fqdn)
    spec = replace(
        spec, cooldown_s=int(found.cooldown_s or spec.cooldown_s), port=int(found.target_port or spec.port)
    )
    outcome.spec = spec
    location = cloud.get_resource_group(rg)
    target = target_of(
        spec, rg, outcome.url, location.location if location else spec.run.plan.location, verify
    )
    try:
        outcome.measurement = measure(
            cloud, target, spec.measure, spec.requests, spec.request_concurrency, waiter, progress
        )
        outcome.gpu_use = gpu_use(cloud, rg, spec.app, waiter, progress)  # warm after the requests
    except KeyboardInterrupt:
        outcome.interrupted = True
        outcome.notes.append(f"the app is kept; `{outcome.delete}` deletes it")
    except AcaGpuError as exc:
        outcome.error = exc
    return outcome


def answer_once(url: str, verify: str | bool = True) -> http.Answer:
    """One GET (the Python API's `app.get()`)."""
    return http.get(url, timeout=60.0, verify=verify)
