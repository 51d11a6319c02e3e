"""`AzureCloud`: the `aca_gpu.models.Cloud` contract over the Azure SDK and the ACA data plane.

Workflows depend only on `Cloud`; this class is the one place that knows which SDK call, preview
endpoint or websocket each step needs, and delegates to the module that makes it. Waits that span
several calls live with deadlines beside what they wait for (a replica reaching Running in
`replica_exec`, stream reconnects in `console_logs`); single HTTP calls retry inside azure-core.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aca_gpu.azure import (
    account,
    apps,
    console_logs,
    job_executions,
    loganalytics,
    preview,
    replica_exec,
    resources,
    shards,
    storage,
)
from aca_gpu.azure.clients import Clients, make_clients
from aca_gpu.config import Settings
from aca_gpu.models import (
    AppInfo,
    AppSpec,
    Cloud,
    ContainerDef,
    EnvInfo,
    EnvSpec,
    ExecResult,
    ExecutionInfo,
    IdentityInfo,
    JobInfo,
    JobSpec,
    LogsDestination,
    MarkedStart,
    ProfileOffer,
    Queues,
    ReplicaContainerInfo,
    ReplicaInfo,
    ResourceGroupInfo,
    RoleAssignmentInfo,
    ShareDownload,
    ShareMount,
    StorageAccountInfo,
    SubscriptionInfo,
    UsageInfo,
)


class AzureCloud:
    """Cloud over Azure (or the emulator, through the endpoint override in Settings)."""

    def __init__(
        self,
        clients: Clients,
        *,
        rg_delete_timeout: float = resources.RG_DELETE_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clients = clients
        self.subscription_id = clients.subscription_id
        self.rg_delete_timeout = rg_delete_timeout
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def from_settings(cls, settings: Settings, subscription: str | None = None) -> AzureCloud:
        return cls(make_clients(settings, subscription))

    def __repr__(self) -> str:
        return f"AzureCloud(subscription_id={self.subscription_id!r})"

    def rate_limits(self) -> Any:
        """What ARM's throttling did to this subscription's calls so far (ratelimit.RateLimits)."""
        gate = self.clients.rate_gate
        return None if gate is None else gate.limits()

    @property
    def _poll(self) -> float:
        return max(0.05, self.clients.settings.polling_interval)

    # ---- subscription-level ------------------------------------------------------------------

    def identity(self) -> IdentityInfo:
        return account.identity(self.clients)

    def subscription(self) -> SubscriptionInfo:
        return account.subscription(self.clients)

    def provider_registered(self, namespace: str) -> bool:
        return resources.provider_registered(self.clients, namespace)

    def register_provider(self, namespace: str, *, timeout: float) -> None:
        resources.register_provider(
            self.clients, namespace, timeout=timeout, sleep=self._sleep, clock=self._clock
        )

    def available_profiles(self, location: str) -> list[ProfileOffer]:
        return resources.available_profiles(self.clients, location)

    def usages(self, location: str) -> list[UsageInfo]:
        return resources.usages(self.clients, location)

    # ---- resource groups ---------------------------------------------------------------------

    def create_resource_group(self, name: str, location: str, tags: Mapping[str, str]) -> ResourceGroupInfo:
        return resources.create_resource_group(self.clients, name, location, tags)

    def get_resource_group(self, name: str) -> ResourceGroupInfo | None:
        return resources.get_resource_group(self.clients, name)

    def list_resource_groups(
        self, tag_name: str | None = None, tag_value: str | None = None
    ) -> list[ResourceGroupInfo]:
        return resources.list_resource_groups(self.clients, tag_name, tag_value)

    def delete_resource_group(self, name: str, *, wait: bool = True) -> None:
        resources.delete_resource_group(
            self.clients,
            name,
            wait=wait,
            timeout=self.rg_delete_timeout,
            sleep=self._sleep,
            clock=self._clock,
        )

    # ---- environment, app, job ---------------------------------------------------------------

    def create_environment(self, spec: EnvSpec) -> EnvInfo:
        return apps.create_environment(self.clients, spec)

    def get_environment(self, resource_group: str, name: str) -> EnvInfo | None:
        return apps.get_environment(self.clients, resource_group, name)

    def create_app(self, spec: AppSpec) -> AppInfo:
        return apps.create_app(self.clients, spec)

    def get_app(self, resource_group: str, name: str) -> AppInfo | None:
        return apps.get_app(self.clients, resource_group, name)

    def scale_app(self, resource_group: str, name: str, min_replicas: int, max_replicas: int) -> AppInfo:
        return apps.scale_app(self.clients, resource_group, name, min_replicas, max_replicas)

    def list_app_replicas(self, resource_group: str, app: str) -> list[ReplicaInfo]:
        """Replicas of the app's latest revision (empty while no revision exists yet)."""
        return replica_exec.app_replicas(self.clients, resource_group, app)

    def list_apps(self, resource_group: str) -> list[AppInfo]:
        return apps.list_apps(self.clients, resource_group)

    def delete_app(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None:
        apps.delete_app(self.clients, resource_group, name, on_accepted=on_accepted)

    def stop_app(self, resource_group: str, name: str) -> None:
        apps.stop_app(self.clients, resource_group, name)

    def start_app(self, resource_group: str, name: str) -> None:
        apps.start_app(self.clients, resource_group, name)

    def create_job(self, spec: JobSpec) -> JobInfo:
        return apps.create_job(self.clients, spec)

    def list_jobs(self, resource_group: str) -> list[JobInfo]:
        return apps.list_jobs(self.clients, resource_group)

    def delete_job(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None:
        apps.delete_job(self.clients, resource_group, name, on_accepted=on_accepted)

    def get_job(self, resource_group: str, name: str) -> JobInfo | None:
        return apps.get_job(self.clients, resource_group, name)

    def set_event_floor(
        self, resource_group: str, job: str, min_executions: int, replica_timeout_s: int
    ) -> None:
        apps.set_event_floor(self.clients, resource_group, job, min_executions, replica_timeout_s)

    def start_job(self, resource_group: str, job: str, template: Sequence[ContainerDef] | None = None) -> str:
        return job_executions.start_job(
            self.clients, resource_group, job, template=template, sleep=self._sleep, clock=self._clock
        )

    def get_execution(self, resource_group: str, job: str, execution: str) -> ExecutionInfo:
        return job_executions.get_execution(self.clients, resource_group, job, execution)

    def list_executions(self, resource_group: str, job: str) -> list[ExecutionInfo]:
        return job_executions.list_executions(self.clients, resource_group, job)

    def start_job_marked(
        self,
        resource_group: str,
        job: str,
        template: Sequence[ContainerDef] | None,
        *,
        key: str,
        token: str,
        cancel: threading.Event | None = None,
    ) -> MarkedStart:
        return shards.start_marked(
            self.clients,
            resource_group,
            job,
            template,
            key=key,
            token=token,
            sleep=self._sleep,
            cancel=cancel,
        )

    def executions_marked(
        self, resource_group: str, job: str, key: str, tokens: Collection[str], *, every: bool = False
    ) -> list[ExecutionInfo]:
        return shards.executions_marked(self.clients, resource_group, job, key, tokens, every=every)

    def stop_execution(self, resource_group: str, job: str, execution: str) -> None:
        shards.stop_execution(self.clients, resource_group, job, execution)

    def environment_usages(self, resource_group: str, environment: str) -> list[UsageInfo]:
        return shards.environment_usages(self.clients, resource_group, environment)

    def make_share_folders(
        self, resource_group: str, account: str, share: str, folders: Sequence[str]
    ) -> None:
        shards.make_folders(self.clients, resource_group, account, share, folders)

    def download_share_folders(
        self,
        resource_group: str,
        account: str,
        share: str,
        folders: Mapping[str, Path],
        on_retry: Callable[[str], None] | None = None,
    ) -> ShareDownload:
        return shards.download(self.clients, resource_group, account, share, folders, on_retry)

    def list_execution_replicas(self, resource_group: str, job: str, execution: str) -> list[ReplicaInfo]:
        return preview.list_execution_replicas(self.clients, resource_group, job, execution)

    def environment_storages(self, resource_group: str, environment: str) -> list[str]:
        return apps.environment_storages(self.clients, resource_group, environment)

    def get_storage_account(self, resource_group: str, name: str) -> StorageAccountInfo | None:
        return storage.get_storage_account(self.clients, resource_group, name)

    def queues(self, resource_group: str, account: str) -> Queues:
        from aca_gpu.azure.queues import storage_queues

        return storage_queues(self.clients, resource_group, account)

    def may_assign_roles(self, resource_group: str) -> bool | None:
        from aca_gpu.azure.acr_registry import may_assign_roles

        return may_assign_roles(self.clients, resource_group)

    def grant_queue_role(
        self, resource_group: str, account: str, queue: str, role: str, principal_id: str, description: str
    ) -> str:
        from aca_gpu.azure import queue_roles

        scope = queue_roles.queue_scope(self.subscription_id, resource_group, account, queue)
        return queue_roles.grant(self.clients, scope, role, principal_id, description, sleep=self._sleep)

    def queue_role_assignments(
        self, resource_group: str, account: str, queue: str
    ) -> list[RoleAssignmentInfo]:
        from aca_gpu.azure import queue_roles

        scope = queue_roles.queue_scope(self.subscription_id, resource_group, account, queue)
        return queue_roles.assignments_at(self.clients, scope)

    def grant_job_role(self, resource_group: str, job: str, principal_id: str, description: str) -> str:
        from aca_gpu.azure import queue_roles

        scope = queue_roles.job_scope(self.subscription_id, resource_group, job)
        return queue_roles.grant(self.clients, scope, "job", principal_id, description, sleep=self._sleep)

    def job_role_assignments(self, resource_group: str, job: str) -> list[RoleAssignmentInfo]:
        from aca_gpu.azure import queue_roles

        scope = queue_roles.job_scope(self.subscription_id, resource_group, job)
        return queue_roles.assignments_at(self.clients, scope)

    def arm_base(self) -> str:
        return self.clients.settings.arm_endpoint or "https://management.azure.com"

    def delete_role_assignment(self, assignment_id: str) -> None:
        from aca_gpu.azure import queue_roles

        queue_roles.delete(self.clients, assignment_id)

    def create_storage_account(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> StorageAccountInfo:
        return storage.create_storage_account(self.clients, resource_group, name, location, tags)

    def file_share_exists(self, resource_group: str, account: str, share: str) -> bool:
        return storage.file_share_exists(self.clients, resource_group, account, share)

    def create_file_share(self, resource_group: str, account: str, share: str, quota_gib: int) -> None:
        storage.create_file_share(self.clients, resource_group, account, share, quota_gib)

    def set_environment_file_storage(
        self, resource_group: str, environment: str, storage_name: str, mount: ShareMount
    ) -> None:
        storage.set_environment_file_storage(self.clients, resource_group, environment, storage_name, mount)

    # ---- data plane --------------------------------------------------------------------------

    @property
    def _pace(self) -> replica_exec.Pace:
        return replica_exec.Pace(self._sleep, self._clock, self._poll)

    def running_container(
        self, resource_group: str, app: str, *, timeout: float, need: str = "exec"
    ) -> tuple[ReplicaInfo, ReplicaContainerInfo]:
        """The latest revision's first replica's first container, once it is Running with an endpoint."""
        return replica_exec.running_container(
            self.clients, self._pace, resource_group, app, timeout=timeout, need=need
        )

    def exec(
        self, resource_group: str, app: str, argv: Sequence[str], *, timeout: float = 120.0
    ) -> ExecResult:
        """Run argv through `sh` in the app's replica; `timeout` covers the replica wait and the command."""
        return replica_exec.exec_shell(self.clients, self._pace, resource_group, app, argv, timeout)

    def exec_raw(self, resource_group: str, app: str, command: str, *, timeout: float = 120.0) -> ExecResult:
        """Run ONE executable with no arguments directly as the exec `command` (no exit code comes back)."""
        return replica_exec.exec_raw(self.clients, self._pace, resource_group, app, command, timeout)

    def app_logs(
        self,
        resource_group: str,
        app: str,
        *,
        follow: bool = False,
        tail: int = 20,
        stop_when: Callable[[str], bool] | None = None,
        timeout: float = 600.0,
    ) -> Iterator[str]:
        return console_logs.app_lines(
            self.clients,
            self._pace,
            resource_group,
            app,
            follow=follow,
            tail=tail,
            stop_when=stop_when,
            timeout=timeout,
        )

    def job_logs(
        self,
        resource_group: str,
        job: str,
        execution: str,
        *,
        follow: bool = True,
        tail: int = 300,
        stop_when: Callable[[str], bool] | None = None,
        timeout: float = 600.0,
        on_running: Callable[..., None] | None = None,
    ) -> Iterator[str]:
        """Console lines of one execution; ends when the execution's replica is gone (it finished).
        `on_running` is called once its container is seen running (it bills from then on, long
        before its first line): a follower's stream is attached while the image still pulls, as in
        `job_log_records`, and the service accepting it is the container's start, so a container
        shorter than a look is neither missed nor counted from the look after its end."""
        log = console_logs.ExecutionLog(self.clients, self._pace, resource_group, job, execution)
        return log.lines(
            follow=follow, tail=tail, stop_when=stop_when, timeout=timeout, on_running=on_running
        )

    def job_log_records(
        self,
        resource_group: str,
        job: str,
        execution: str,
        *,
        timeout: float = 600.0,
        on_running: Callable[..., None] | None = None,
        on_closed: Callable[[], None] | None = None,
        on_late: Callable[[], None] | None = None,
    ) -> Iterator[tuple[str | None, str, str]]:
        """(timestamp, stdout|stderr, line) of one execution from its start, followed to its end;
        `on_running` as for `job_logs` (a silent program bills from its start, not its first line).

        The stream is attached as early as Azure allows: its endpoint is listed with the replica
        while the image still pulls, and a container that has not started is asked again every
        0.1 s, so a container that prints and exits at once is read while it runs. A stream that
        could not be attached before the replica ended, or broke off, raises
        InfraError(LogStreamLost) at the end: the caller reads the lines elsewhere. `on_closed` is
        called whenever the service ends a connection by itself (its container exited, or lingers
        ended), before the execution says it finished: the moment billing stopped. `on_late` is
        called when the container was running (or had ended) before the stream could be asked
        for: then `on_running` is no witness of its start."""
        log = console_logs.ExecutionLog(self.clients, self._pace, resource_group, job, execution)
        return log.records(timeout=timeout, on_running=on_running, on_closed=on_closed, on_late=on_late)

    def ensure_logs_workspace(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> LogsDestination:
        return loganalytics.ensure_workspace(self.clients, resource_group, name, location, tags)

    def console_lines(self, workspace_id: str, job: str, execution: str) -> list[tuple[str | None, str, str]]:
        return loganalytics.console_lines(self.clients, workspace_id, job, execution)

    def execution_end_logged(self, workspace_id: str, job: str, execution: str) -> bool:
        return loganalytics.execution_end_logged(self.clients, workspace_id, job, execution)

    def system_events(
        self, resource_group: str, *, app: str | None = None, environment: str | None = None, tail: int = 50
    ) -> list[dict[str, Any]]:
        """A snapshot of the app's (or environment's) system events: AssigningReplica, pull errors..."""
        return console_logs.system_events(
            self.clients, resource_group, app=app, environment=environment, tail=tail
        )


if TYPE_CHECKING:

    def _conforms(cloud: AzureCloud) -> Cloud:
        """mypy proves AzureCloud structurally satisfies the Cloud protocol."""
        return cloud
