"""Replica lifecycle: assign → pull → start (through the workload) → run → stop, plus job executions,
scale-in and the end of deletes. Driven by one asyncio ticker; state changes happen here or in handlers."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from aca_gpu.emulator import catalog, placement
from aca_gpu.emulator.arm import utc_now
from aca_gpu.emulator.faults import Faults, probe_fault_text, pull_error
from aca_gpu.emulator.providers.operationalinsights import ingest as logs_table
from aca_gpu.emulator.pulls import PullModel, gpu_driver_text, pull_plan, pulled_text
from aca_gpu.emulator.share_folders import share_key
from aca_gpu.emulator.state import (
    App,
    BillingRecord,
    Environment,
    Event,
    Execution,
    Job,
    LogLine,
    Replica,
    Revision,
    State,
    in_env,
    key,
)
from aca_gpu.emulator.timing import DURATIONS, LINGER_FLOOR_S, Clock
from aca_gpu.emulator.workloads import host_gpus
from aca_gpu.emulator.workloads.base import Container, ContainerSpec, StartFailure, Workload

log = logging.getLogger(__name__)


def volume_mounts(
    env: Environment | None, template: dict[str, Any], container: dict[str, Any]
) -> tuple[tuple[str, str, bool], ...]:
    """(storage key, mount path, read-only) of a container's volumeMounts on its environment's storages."""
    volumes = {str(v.get("name")): v for v in template.get("volumes") or [] if isinstance(v, dict)}
    found = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(str(mount.get("volumeName")))
        storage = str((volume or {}).get("storageName") or "")
        if env is not None and storage in env.storages:
            azure_file = env.storages[storage]["azureFile"]
            read_only = azure_file.get("accessMode") == "ReadOnly"
            where = share_key(str(azure_file.get("accountName")), str(azure_file.get("shareName")))
            found.append((where, str(mount.get("mountPath")), read_only))
    return tuple(found)


def container_specs(
    template: dict[str, Any],
    *,
    profile_type: str,
    kind: str,
    replica: str,
    extra_env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    place: Environment | None = None,
    ingress_port: int = 0,
) -> list[ContainerSpec]:
    specs = []
    for c in template.get("containers") or []:
        env = {
            str(e.get("name")): str(
                (secrets or {}).get(str(e.get("secretRef")), "")
                if e.get("secretRef")
                else e.get("value") or ""
            )
            for e in c.get("env") or []
            if e.get("name")
        }
        env.update(extra_env or {})
        specs.append(
            ContainerSpec(
                name=str(c.get("name") or ""),
                image=str(c.get("image") or ""),
                command=tuple(str(x) for x in c.get("command") or ()),
                args=tuple(str(x) for x in c.get("args") or ()),
                env=env,
                profile_type=profile_type,
                kind=kind,
                replica=replica,
                mounts=volume_mounts(place, template, c),
                ingress_port=ingress_port,
                probe_ports=probe_ports(c) if ingress_port else (),
            )
        )
    return specs


def probe_ports(container: dict[str, Any]) -> tuple[int, ...]:
    """The ports a container's probes look at (HTTP or TCP)."""
    found = []
    for probe in container.get("probes") or []:
        where = (probe.get("httpGet") or probe.get("tcpSocket") or {}) if isinstance(probe, dict) else {}
        if isinstance(where, dict) and str(where.get("port") or "").isdigit():
            found.append(int(where["port"]))
    return tuple(found)


class Runtime:
    def __init__(
        self,
        state: State,
        clock: Clock,
        workload: Workload,
        faults: Faults,
        pull_model: PullModel | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.workload = workload
        self.faults = faults
        self.pull_model = pull_model or PullModel()
        self.peers: list[State] = [state]  # every emulated subscription's state (registries are global)
        self._budget: placement.GpuBudget | None = None  # GPUs placed, counted once per tick

    # ---- events and billing -------------------------------------------------------------------
    def emit(
        self,
        rep: Replica | None,
        *,
        env: str,
        env_rg: str,
        rg: str,
        app: str | None,
        reason: str,
        msg: str,
        revision: str = "",
        type_: str = "Normal",
    ) -> None:
        self.state.events.append(
            Event(
                at=utc_now(),
                env=env,
                rg=rg,
                env_rg=env_rg,
                app=app,
                revision=rep.parent if rep else revision,
                replica=rep.name if rep else "",
                msg=msg,
                reason=reason,
                type=type_,
            )
        )
        logs_table.ingest_event(self.state, self.clock, self.state.events[-1])  # the system log table

    def emit_replica(self, rep: Replica, reason: str, msg: str, type_: str = "Normal") -> None:
        self._emit_rep(rep, reason, msg, type_)

    def _emit_rep(self, rep: Replica, reason: str, msg: str, type_: str = "Normal") -> None:
        self.emit(
            rep, env=rep.env, env_rg=rep.env_rg, rg=rep.rg, app=rep.owner, reason=reason, msg=msg, type_=type_
        )

    # ---- replicas -----------------------------------------------------------------------------
    def new_replica(
        self,
        *,
        kind: str,
        owner: str,
        parent: str,
        rg: str,
        env: str,
        env_rg: str,
        profile_type: str,
        template: dict[str, Any],
        run_id: str | None,
        name: str,
        retry_limit: int | None = None,
        extra_env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        ingress_port: int = 0,
    ) -> Replica:
        rep = Replica(
            name=name,
            kind=kind,
            owner=owner,
            parent=parent,
            rg=rg,
            env=env,
            env_rg=env_rg,
            profile_type=profile_type,
            specs=container_specs(
                template,
                profile_type=profile_type,
                kind=kind,
                replica=name,
                extra_env=extra_env,
                secrets=secrets,
                place=self.state.envs.get(key(env_rg, env)),
                ingress_port=ingress_port,
            ),
            run_id=run_id,
            retry_limit=retry_limit,
        )
        env_rec = self.state.envs.get(key(env_rg, env))
        where = {"location": env_rec.location if env_rec else "", "profile": profile_type}
        rep.stuck = self.faults.fire("stuck", path=name, **where) is not None
        sick = self.faults.fire("gpu", path=name, **where)
        if sick is not None:
            rep.specs = [replace(spec, gpu_health=sick.param("health", "ecc")) for spec in rep.specs]
        if kind == "app" and ingress_port and self.faults.fire("cpu_fallback", path=name, **where):
            rep.specs = [replace(spec, gpu_idle=True) for spec in rep.specs]
        rep.oom = bool(kind == "app" and ingress_port and self.faults.fire("oom", path=name, **where))
        unhealthy = self.faults.fire("probe", path=name, **where) if kind == "app" and ingress_port else None
        rep.probe_fault = probe_fault_text(unhealthy) if unhealthy is not None else ""
        rep.phase_until = self.clock.after("assign_replica")
        for spec in rep.specs:
            rep.logs[spec.name] = []
        self._emit_rep(rep, "AssigningReplica", f"Replica '{name}' has been scheduled to run on a node.")
        return rep

    def stop_replica(self, rep: Replica) -> None:
        """Stop its containers and close its billing record; the caller removes it from its parent."""
        if rep.gone:
            return
        rep.gone = True
        self._capture_logs(rep)
        for handle in rep.handles.values():
            try:
                handle.stop()
            except Exception:  # a misbehaving workload must not wedge the server
                log.exception("stopping container of %s", rep.name)
        if rep.billing is not None and rep.billing.ended_wall is None:
            rep.billing.ended_wall = self.clock.now()
        if rep.phase not in ("Terminated",):
            rep.phase = "Terminated"

    async def _start(self, rep: Replica) -> None:
        rep.phase = "Starting"
        started: dict[str, Container] = {}
        try:
            for spec in rep.specs:
                started[spec.name] = await asyncio.to_thread(
                    self.workload.start, spec, time_scale=self.clock.scale
                )
        except StartFailure as exc:
            for handle in started.values():
                handle.stop()
            rep.restart_count += 1
            rep.phase = "Waiting"
            rep.details = exc.message
            rep.phase_until = self.clock.after("restart_backoff")
            self._emit_rep(rep, exc.reason, exc.message, "Warning")
            return
        if rep.gone:
            for handle in started.values():
                handle.stop()
            return
        rep.handles = started
        # a restarted container's console starts empty; its lines follow the earlier attempts' lines
        rep.log_base = {name: len(rep.logs.get(name, [])) for name in started}
        rep.phase = "Running"
        rep.exit_code = None
        placement.mark_if_lost(self, rep)
        rep.started_at = utc_now()
        rep.details = f"Container started at: {rep.started_at:%-m/%-d/%Y %-I:%M:%S %p}."
        for spec in rep.specs:
            self._emit_rep(rep, "ContainerCreated", f"Created container '{spec.name}'")
            self._emit_rep(rep, "ContainerStarted", f"Started container '{spec.name}'")
        # the host workload's word that this replica shares a GPU (an emulator event, no ACA one)
        for notice in dict.fromkeys(n for h in started.values() if (n := getattr(h, "notice", None))):
            self._emit_rep(rep, host_gpus.SHARED_REASON, notice, "Warning")
        if rep.billing is None:
            self._open_billing(
                rep, real_time=all(getattr(h, "real_process", False) for h in started.values())
            )

    def _open_billing(self, rep: Replica, *, stalled: bool = False, real_time: bool = False) -> None:
        """The replica starts costing: at container start, or at the image pull when it stalls."""
        owner = (self.state.apps if rep.kind == "app" else self.state.jobs).get(
            (rep.rg.lower(), rep.owner.lower())
        )
        env = self.state.envs.get((rep.env_rg.lower(), rep.env.lower()))  # maybe another group
        rep.billing = BillingRecord(
            run_id=rep.run_id,
            kind=rep.kind,
            resource=rep.owner,
            parent=rep.parent,
            replica=rep.name,
            profile_type=rep.profile_type,
            gpus=catalog.gpus(rep.profile_type),
            started_wall=self.clock.now(),
            resource_group=rep.rg,
            location=env.location if env else "",
            vcpu=sum(_resource(c, "cpu") for c in _containers(owner)),
            memory_gib=sum(_resource(c, "memory") for c in _containers(owner)),
            tags=dict(owner.tags) if owner is not None else {},
            stalled=stalled,
            real_time=real_time,
        )
        self.state.billing.append(rep.billing)

    def _capture_logs(self, rep: Replica) -> None:
        for name, handle in rep.handles.items():
            lines = rep.logs.setdefault(name, [])
            start = len(lines) - rep.log_base.get(name, 0)
            streams = getattr(handle, "streams", None)  # which lines went to stderr, when it knows
            fresh = handle.logs(start)
            if fresh:
                now = utc_now()
                kinds = streams(start) if streams is not None else []
                new = [
                    LogLine(now, text, kinds[i] if i < len(kinds) else "stdout")
                    for i, text in enumerate(fresh)
                ]
                lines.extend(new)
                logs_table.ingest(self.state, self.clock, rep, name, new)  # the environment's workspace

    async def _advance(self, rep: Replica) -> None:
        now = self.clock.now()
        due = rep.phase_until is not None and now >= rep.phase_until
        if rep.phase == "AssigningReplica" and due and not rep.stuck:
            budget = self._budget or placement.GpuBudget(self)  # GPU quota is taken at placement
            if not budget.admit(rep) or placement.backoff_before_pull(self, rep):
                return
            if catalog.gpus(rep.profile_type) and not rep.restart_count:
                # a GPU node says its driver once the pod starts, before any pull (as one Sweden
                # Central T4 deployment saw it, 2026-09-18; UNCONFIRMED for other regions and GPUs)
                self._emit_rep(rep, "GpuDriverInfo", gpu_driver_text(self.workload.driver_version))
            rep.phase = "PullingImage"
            env_rec = self.state.envs.get((rep.env_rg.lower(), rep.env.lower()))
            rep.pulls = [pull_plan(self, rep, env_rec, s.image) for s in rep.specs]
            rep.pull_s = [p.seconds for p in rep.pulls]
            rep.phase_until = self.clock.after_seconds(placement.pull_seconds(self, rep, sum(rep.pull_s)))
            for spec in rep.specs:
                self._emit_rep(rep, "PullingImage", f'Pulling image "{spec.image}"')
        elif rep.phase == "PullingImage" and due:
            if self._pull_failed(rep):
                return
            env_rec = self.state.envs.get((rep.env_rg.lower(), rep.env.lower()))
            for spec, plan in zip(rep.specs, rep.pulls, strict=False):
                self._emit_rep(rep, "ImagePulled", pulled_text(self, spec.image, plan))
                if env_rec is not None:
                    env_rec.pulled[(rep.profile_type, spec.image)] = now
            rep.phase = "Creating"
            rep.phase_until = self.clock.after("container_create")
            stall = self.faults.fire(
                "stall", path=rep.name, location=env_rec.location if env_rec else "", profile=rep.profile_type
            )
            if stall is not None:  # placed and billed, but the container is not created for minutes
                rep.phase_until = self.clock.after_seconds(float(stall.param("seconds", "1500")))
                self._open_billing(rep, stalled=True)
        elif rep.phase in ("Creating", "Waiting") and due:
            await self._start(rep)
        elif rep.phase == "Running" and rep.lost_at is not None and now >= rep.lost_at:
            placement.lose(self, rep)
        elif rep.phase == "Running" and rep.oom:
            self._kill_for_memory(rep)
        elif rep.phase == "Running":
            self._capture_logs(rep)
            codes = [h.exit_code for h in rep.handles.values()]
            if rep.handles and all(c is not None for c in codes):
                self._on_exit(rep, next((c for c in codes if c), 0))

    def _kill_for_memory(self, rep: Replica) -> None:
        """The `oom` fault: the container is killed for memory at its first tick running (a model
        too large for the replica, while it loads), then restarted after the back-off, as the
        platform restarts an app's container (the event's wording is UNCONFIRMED for ACA)."""
        self._emit_rep(
            rep,
            "ContainerTerminated",
            f"Container '{rep.specs[0].name}' was terminated with exit code '137' and reason 'OOMKilled'",
            "Warning",
        )
        self.restart_container(rep, "OOMKilled", exit_code=137)

    def restart_container(self, rep: Replica, details: str, *, exit_code: int | None = None) -> None:
        """Stop the replica's running containers and start them again after the back-off, as the
        platform restarts an app's container that was killed (for memory, or by its startup probe)."""
        for handle in rep.handles.values():
            handle.stop()
        self._capture_logs(rep)
        rep.exit_code = exit_code
        rep.restart_count += 1
        rep.phase = "Waiting"
        rep.details = details
        rep.phase_until = self.clock.after("restart_backoff")

    def _pull_failed(self, rep: Replica) -> bool:
        """The `pull` fault: the pull fails as ACA's log shows it and is retried after a back-off
        (ImagePullBackOff); each failure counts against a job replica's retry limit."""
        env_rec = self.state.envs.get((rep.env_rg.lower(), rep.env.lower()))
        where = env_rec.location if env_rec else ""
        for spec, plan in zip(rep.specs, rep.pulls or [None] * len(rep.specs), strict=False):
            fault = self.faults.fire("pull", path=spec.image, location=where, profile=rep.profile_type)
            error = pull_error(fault, spec.image) if fault is not None else (plan.refused if plan else "")
            if not error:
                continue
            self._emit_rep(
                rep,
                "ContainerTerminated",
                f"Container '{spec.name}' was terminated with exit code '' and reason 'ImagePullFailure'. "
                f"Pull image: {spec.image} failed with exit code: 1, error: {error}",
                "Warning",
            )
            rep.restart_count += 1
            rep.details = f'ImagePullBackOff: Back-off pulling image "{spec.image}"'
            rep.phase_until = self.clock.after("restart_backoff")
            return True
        if rep.details.startswith("ImagePullBackOff"):
            rep.details = ""
        return False

    def _on_exit(self, rep: Replica, code: int | None) -> None:
        # the last lines may have been printed after this tick's capture but before the exit
        self._capture_logs(rep)
        rep.exit_code = code
        self._emit_rep(
            rep,
            "ContainerTerminated",
            f"Container '{rep.specs[0].name}' was terminated with exit code '{code}'",
        )
        if rep.kind == "job" and (
            code == 0 or (rep.retry_limit is not None and rep.restart_count >= rep.retry_limit)
        ):
            rep.phase = "Terminated"
            if rep.billing is not None:
                rep.billing.ended_wall = self.clock.now()
            return
        # apps restart forever; jobs retry within replicaRetryLimit
        rep.restart_count += 1
        rep.phase = "Waiting"
        rep.details = f"Container exited with code {code}"
        rep.phase_until = self.clock.after("restart_backoff")

    # ---- the ticker ---------------------------------------------------------------------------
    async def tick(self) -> None:
        self._budget = placement.GpuBudget(self)
        for rep in self.state.replicas():
            if not rep.gone:
                await self._advance(rep)
        self._budget = None
        for job in list(self.state.jobs.values()):
            for ex in job.executions.values():
                if ex.status == "Running":
                    self._advance_execution(job, ex)
        now = self.clock.now()
        for app in list(self.state.apps.values()):
            for rev in app.revisions.values():
                if rev.scale_in_at is not None and now >= rev.scale_in_at and rev.replicas:
                    self.scale_in(app, rev.name)
            if app.deleting and app.delete_done_at is not None and now >= app.delete_done_at:
                self.remove_app(app)
        for job in list(self.state.jobs.values()):
            if job.deleting and job.delete_done_at is not None and now >= job.delete_done_at:
                self.remove_job(job)
        for env in list(self.state.envs.values()):
            if env.deleting and env.delete_done_at is not None and now >= env.delete_done_at:
                self.remove_env(env)
        for rg in list(self.state.rgs.values()):
            if not rg.deleting:
                continue
            if any(e.rg.lower() == rg.name.lower() for e in self.state.envs.values()):
                continue
            if rg.delete_done_at is None:
                rg.delete_done_at = self.clock.after("rg_delete_extra")
            elif now >= rg.delete_done_at:
                self.remove_rg_contents(rg.name)
                self.state.rgs.pop(rg.name.lower(), None)

    def _advance_execution(self, job: Job, ex: Execution) -> None:
        reps = list(ex.replicas.values())
        # a replica that runs a real process lives in real seconds: its timeout is real minutes
        # too (a scaled one stopped a `sh -c 'sleep 100'` under `--max-minutes 3` after 1.8 s)
        real = bool(reps) and all(r.billing is not None and r.billing.real_time for r in reps)
        deadline = ex.real_deadline if real and ex.real_deadline is not None else ex.deadline
        if deadline is not None and self.clock.now() >= deadline:
            self.finish_execution(
                job,
                ex,
                "Failed",
                reason="DeadlineExceeded",
                message="Job was active longer than specified deadline",
            )
            return
        if reps and all(r.phase == "Terminated" for r in reps):
            if ex.linger_until is None:
                linger = max(LINGER_FLOOR_S, self.clock.scaled(DURATIONS["replica_linger"]))
                short = self.faults.fire("linger", path=job.name)
                if short is not None:  # how long Azure keeps it is UNCONFIRMED: the worst case
                    linger = self.clock.scaled(float(short.param("seconds", "0")))
                ex.linger_until = self.clock.now() + linger
            if self.clock.now() < ex.linger_until:
                return
            if all(r.exit_code == 0 for r in reps):
                self.finish_execution(job, ex, "Succeeded")
            else:
                self._backoff_exceeded(job, ex)
            return
        if any(
            r.phase in ("Waiting", "PullingImage")  # a pull that failed counts as a failed attempt
            and r.retry_limit is not None
            and r.restart_count > r.retry_limit
            for r in reps
        ):
            self._backoff_exceeded(job, ex)

    def _backoff_exceeded(self, job: Job, ex: Execution) -> None:
        self.finish_execution(
            job,
            ex,
            "Failed",
            reason="BackoffLimitExceeded",
            message="Job has reached the specified backoff limit",
        )

    def finish_execution(
        self, job: Job, ex: Execution, status: str, *, reason: str | None = None, message: str | None = None
    ) -> None:
        ex.status = status
        ex.ended = utc_now()
        ex.reason = reason
        ex.message = message
        for rep in ex.replicas.values():
            self.stop_replica(rep)
            # a replica stopped while it ran has a code only where its container gave itself one
            # on the stop (the tester in its result grace exits with its verdict on SIGTERM)
            stopped = (h.stopped_code for h in rep.handles.values())
            ex.codes[rep.name] = (
                rep.exit_code
                if rep.exit_code is not None
                else next((c for c in stopped if c is not None), None)
            )
            for lines in rep.logs.values():
                ex.console.extend(lines)
        ex.replicas.clear()  # as on Azure: the replica is gone once the execution ends
        self.emit(
            None,
            env=job.env,
            env_rg=job.env_rg,
            rg=job.rg,
            app=job.name,
            revision=ex.name,
            reason=reason or "Completed",
            msg=(message or reason) if reason else f"Job execution '{ex.name}' completed",
            type_="Warning" if reason else "Normal",
        )

    # ---- removal ------------------------------------------------------------------------------
    def scale_in(self, app: App, revision: str) -> None:
        rev = app.revisions[revision]
        for rep in rev.replicas.values():
            self.stop_replica(rep)
            self._emit_rep(rep, "ScaledIn", f"Replica '{rep.name}' was scaled in")
        rev.replicas.clear()
        rev.scale_in_at = None

    def scale_in_replicas(self, rev: Revision, names: list[str]) -> None:
        """Some of a revision's replicas scaled in (a scale rule wants fewer): stopped, said, gone."""
        for name in names:
            rep = rev.replicas.pop(name, None)
            if rep is not None:
                self.stop_replica(rep)
                self._emit_rep(rep, "ScaledIn", f"Replica '{rep.name}' was scaled in")

    def stop_app_replicas(self, app: App) -> None:
        for rev in app.revisions.values():
            for rep in rev.replicas.values():
                self.stop_replica(rep)
            rev.replicas.clear()

    def remove_app(self, app: App) -> None:
        self.stop_app_replicas(app)
        self.state.apps.pop(key(app.rg, app.name), None)

    def remove_job(self, job: Job) -> None:
        for ex in job.executions.values():
            if ex.status == "Running":
                self.finish_execution(job, ex, "Stopped")
        self.state.jobs.pop(key(job.rg, job.name), None)

    def remove_env(self, env: Environment) -> None:
        for app in [a for a in self.state.apps.values() if in_env(a, env)]:
            self.remove_app(app)
        for job in [j for j in self.state.jobs.values() if in_env(j, env)]:
            self.remove_job(job)
        self.state.envs.pop(key(env.rg, env.name), None)
        self.state.principals.pop(str(env.identity.get("principalId") or ""), None)

    def remove_rg_contents(self, rg: str) -> None:
        for app in [a for a in self.state.apps.values() if a.rg.lower() == rg.lower()]:
            self.remove_app(app)
        for job in [j for j in self.state.jobs.values() if j.rg.lower() == rg.lower()]:
            self.remove_job(job)
        for env in [e for e in self.state.envs.values() if e.rg.lower() == rg.lower()]:
            self.remove_env(env)
        for name in [k for k in self.state.log_workspaces if k[0] == rg.lower()]:
            del self.state.log_workspaces[name]

    def stop_all(self) -> None:
        for rep in self.state.replicas():
            self.stop_replica(rep)


def _containers(owner: Any) -> list[dict[str, Any]]:
    template = getattr(owner, "template", None) or {}
    return [c for c in template.get("containers") or [] if isinstance(c, dict)]


def _resource(container: dict[str, Any], key: str) -> float:
    """A container's requested `cpu` or `memory` ("56Gi") as a number: what its replica is billed for."""
    value = (container.get("resources") or {}).get(key) or 0
    try:
        return float(str(value).removesuffix("Gi"))
    except ValueError:
        return 0.0
