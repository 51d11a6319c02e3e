"""Plain records that cross layers, and `Cloud`: the contract aca_gpu/azure implements for workflows.

Workflows see only these types; `aca_gpu.azure.cloud.AzureCloud` turns SDK models into them, so the
same workflow runs against Azure, the emulator, or an autospec'd double in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading


@dataclass(frozen=True)
class Record:
    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ResourceGroupInfo(Record):
    name: str
    location: str
    tags: Mapping[str, str]
    provisioning_state: str | None = None


@dataclass(frozen=True)
class StorageAccountInfo(Record):
    """A storage account as read back (never its keys)."""

    name: str
    resource_group: str
    location: str
    tags: Mapping[str, str]
    provisioning_state: str | None = None


@dataclass(frozen=True)
class ShareMount(Record):
    """An Azure Files share as an environment storage mounts it. The account's group may differ from
    the environment's; the account key never travels in this record (the Azure layer reads it)."""

    account_group: str
    account: str
    share: str
    access_mode: str = "ReadWrite"


@dataclass(frozen=True)
class ShareDownload(Record):
    """What a download from an Azure Files share brought back: every file written (complete, under
    its own name) and every file or folder that did not arrive after its retries, with why, so a
    caller can count what arrived and name what did not."""

    written: tuple[Path, ...] = ()
    missed: tuple[tuple[str, str], ...] = ()  # (share path, why), in the order met
    retries: int = 0  # transfers sent again after a transient failure


@dataclass(frozen=True)
class FleetGroup(Record):
    """A resource group found across subscriptions (Resource Graph), with the environments in it."""

    subscription: str
    group: ResourceGroupInfo
    environments: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfileOffer(Record):
    """A workload profile type a region offers (available_workload_profiles)."""

    name: str  # the workload profile TYPE, e.g. Consumption-GPU-NC8as-T4
    category: str | None
    cores: int | None
    memory_gib: int | None
    gpus: int | None
    display_name: str | None = None


@dataclass(frozen=True)
class IdentityInfo(Record):
    """Who a credential is, from its token's claims (never the token itself)."""

    kind: str  # user | application | unknown | opaque token (not a JWT)
    tenant_id: str | None = None
    object_id: str | None = None
    upn: str | None = None
    app_id: str | None = None


@dataclass(frozen=True)
class SubscriptionInfo(Record):
    id: str
    display_name: str | None = None
    state: str | None = None  # Enabled, Disabled, Warned, PastDue, Deleted
    tenant_id: str | None = None


@dataclass(frozen=True)
class UsageInfo(Record):
    name: str  # name.value, e.g. ManagedEnvironmentCount
    current: float
    limit: float
    unit: str | None = None
    display_name: str | None = None  # name.localizedValue


@dataclass(frozen=True)
class ContainerDef(Record):
    name: str
    image: str
    cpu: float
    memory: str  # e.g. "56Gi"
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)  # env var -> secret name (secretRef)
    mounts: tuple[tuple[str, str], ...] = ()  # (volume name, mount path) of the job's volumes


@dataclass(frozen=True)
class RegistryCred(Record):
    """How a job pulls from a private registry: a managed identity, or a user + a password secret."""

    server: str
    identity: str | None = None
    username: str | None = None
    password_secret: str | None = None  # the name of the job secret holding the password


@dataclass(frozen=True)
class LogsDestination(Record):
    """A Log Analytics workspace an environment sends its console lines to (`appLogsConfiguration`):
    what lets a finished execution's lines be read after its replica is gone. The shared key is a
    secret: it travels in the environment's PUT only and is never printed or kept."""

    workspace_id: str  # the workspace's customerId (the query API's workspace id)
    shared_key: str = field(repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"workspace_id": self.workspace_id}  # never the key


@dataclass(frozen=True)
class EnvSpec(Record):
    resource_group: str
    name: str
    location: str
    tags: Mapping[str, str]
    gpu_profile_name: str  # the label apps reference, e.g. "gpu"
    gpu_profile_type: str  # e.g. Consumption-GPU-NC8as-T4 or NC24-A100
    dedicated_counts: tuple[int, int] | None = None  # (min, max) for dedicated profiles only
    # further GPU profiles (name, type) in the same environment, so validation pairs share one env
    extra_gpu_profiles: tuple[tuple[str, str], ...] = ()
    logs: LogsDestination | None = None  # where its console lines go (None: nowhere but the stream)


@dataclass(frozen=True)
class EnvInfo(Record):
    id: str
    name: str
    resource_group: str
    location: str
    provisioning_state: str | None
    event_stream_endpoint: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    workload_profiles: tuple[tuple[str, str], ...] = ()  # (name, type), as the environment says
    logs_workspace: str | None = None  # the Log Analytics workspace (customerId) its console lines go to

    def profile_named_for(self, profile_type: str) -> str | None:
        """The name this environment gives a workload profile type (runs reference it by name)."""
        return next((n for n, t in self.workload_profiles if t.lower() == profile_type.lower()), None)


@dataclass(frozen=True)
class AppSpec(Record):
    resource_group: str
    name: str
    location: str
    environment_id: str
    workload_profile_name: str
    container: ContainerDef
    tags: Mapping[str, str]
    min_replicas: int = 1
    max_replicas: int = 1


@dataclass(frozen=True)
class AppInfo(Record):
    id: str
    name: str
    resource_group: str
    provisioning_state: str | None
    running_status: str | None
    latest_revision: str | None
    event_stream_endpoint: str | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec(Record):
    resource_group: str
    name: str
    location: str
    environment_id: str
    workload_profile_name: str
    container: ContainerDef
    tags: Mapping[str, str]
    replica_timeout_s: int = 1800
    retry_limit: int = 0
    # secret name -> value: sent in the job's PUT only (ARM never answers values back); hidden from repr
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    registries: tuple[RegistryCred, ...] = ()
    volumes: tuple[tuple[str, str], ...] = ()  # (volume name, environment storage name): Azure Files
    # an Event job (queue mode): KEDA's azure-queue rule instead of a manual trigger, with a
    # system-assigned identity that the rule and the containers sign in with
    event: EventTrigger | None = None


@dataclass(frozen=True)
class EventTrigger(Record):
    """An Event job's trigger: the `azure-queue` scale rule on one queue of one storage account."""

    account: str
    queue: str
    queue_length: int = 1  # messages per execution KEDA aims at
    min_executions: int = 0
    max_executions: int = 10
    polling_interval_s: int = 30


@dataclass(frozen=True)
class QueueMessage(Record):
    id: str
    pop_receipt: str
    text: str
    dequeue_count: int = 1


class Queues(Protocol):
    """One storage account's queues (the Storage queue data plane), signed with the account key."""

    endpoint: str  # the account's queue endpoint (primaryEndpoints.queue), for the workers

    def create(self, queue: str, metadata: Mapping[str, str] | None = None) -> None: ...
    def metadata(self, queue: str) -> dict[str, str] | None: ...  # None: no such queue
    def delete(self, queue: str) -> None: ...  # a missing queue is no error
    def send(self, queue: str, texts: Sequence[str]) -> None: ...
    def receive(self, queue: str, count: int, visibility_s: int) -> list[QueueMessage]: ...
    def delete_message(self, queue: str, message: QueueMessage) -> None: ...
    def length(self, queue: str) -> int | None: ...  # approximate count; None: no such queue


@dataclass(frozen=True)
class JobInfo(Record):
    id: str
    name: str
    resource_group: str
    provisioning_state: str | None
    event_stream_endpoint: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    principal_id: str | None = None  # its system-assigned identity's, when it has one


@dataclass(frozen=True)
class RoleAssignmentInfo(Record):
    id: str
    principal_id: str
    role_definition_id: str
    scope: str
    description: str | None = None


@dataclass(frozen=True)
class ReplicaContainerInfo(Record):
    name: str
    running_state: str | None
    ready: bool | None = None
    restart_count: int | None = None
    details: str | None = None
    exec_endpoint: str | None = None
    log_stream_endpoint: str | None = None


@dataclass(frozen=True)
class ReplicaInfo(Record):
    name: str
    running_state: str | None
    containers: tuple[ReplicaContainerInfo, ...] = ()
    details: str | None = None


FINAL_EXECUTION_STATES = frozenset({"Succeeded", "Failed", "Stopped", "Degraded"})


@dataclass(frozen=True)
class MarkedStart(Record):
    """A start matched to its execution by its token. `extras`: other executions that carried the
    same token (a start ARM accepted although its answer said otherwise, sent again after a look
    that could not yet see it): each was stopped, and is named so the run's record says so."""

    execution: str
    extras: tuple[str, ...] = ()
    unanswered: bool = False  # a POST of it failed: a copy may list late (look at every page a while)


@dataclass(frozen=True)
class ExecutionInfo(Record):
    name: str
    status: str | None  # Running, Processing, Succeeded, Failed, Stopped, Degraded, Unknown
    start_time: str | None = None
    end_time: str | None = None
    # containers' exit codes from properties.detailedStatus (SDK 5.1); empty until the execution has ended
    exit_codes: tuple[int, ...] = ()
    reason: str | None = None  # properties.reason / message: why the platform ended it, when it says
    message: str | None = None
    # the execution's own template env (first container; values only, never a secretRef's): how a
    # fan-out matches an execution to its shard by the token it was started with
    env: Mapping[str, str] = field(default_factory=dict)
    # each replica container's detailed status while it runs (AssigningReplica, PullingImage, ...)
    states: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return (self.status or "") in FINAL_EXECUTION_STATES


@dataclass(frozen=True)
class ExecResult(Record):
    command: tuple[str, ...]
    output: str  # stdout (and stderr where the session merges them), marker lines removed
    stderr: str
    exit_code: int | None  # None when the session ended before the exit marker arrived


class Cloud(Protocol):
    """What workflows need from Azure. Every method translates errors to aca_gpu.errors types.

    Long operations block until done (LRO polling inside) unless a `wait=False` says otherwise.
    """

    subscription_id: str

    # subscription-level
    def identity(self) -> IdentityInfo: ...
    def subscription(self) -> SubscriptionInfo: ...
    def provider_registered(self, namespace: str) -> bool: ...
    def register_provider(self, namespace: str, *, timeout: float) -> None: ...
    def available_profiles(self, location: str) -> list[ProfileOffer]: ...
    def usages(self, location: str) -> list[UsageInfo]: ...

    # resource groups
    def create_resource_group(
        self, name: str, location: str, tags: Mapping[str, str]
    ) -> ResourceGroupInfo: ...
    def get_resource_group(self, name: str) -> ResourceGroupInfo | None: ...
    def list_resource_groups(
        self, tag_name: str | None = None, tag_value: str | None = None
    ) -> list[ResourceGroupInfo]: ...
    def delete_resource_group(self, name: str, *, wait: bool = True) -> None: ...

    # environment, app, job
    def create_environment(self, spec: EnvSpec) -> EnvInfo: ...
    def get_environment(self, resource_group: str, name: str) -> EnvInfo | None: ...
    def create_app(self, spec: AppSpec) -> AppInfo: ...
    def get_app(self, resource_group: str, name: str) -> AppInfo | None: ...
    def scale_app(self, resource_group: str, name: str, min_replicas: int, max_replicas: int) -> AppInfo: ...
    def list_app_replicas(self, resource_group: str, app: str) -> list[ReplicaInfo]: ...
    def list_apps(self, resource_group: str) -> list[AppInfo]: ...
    def delete_app(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None: ...
    def stop_app(self, resource_group: str, name: str) -> None: ...
    def start_app(self, resource_group: str, name: str) -> None: ...
    def create_job(self, spec: JobSpec) -> JobInfo: ...
    def get_job(self, resource_group: str, name: str) -> JobInfo | None: ...
    def list_jobs(self, resource_group: str) -> list[JobInfo]: ...
    def set_event_floor(
        self, resource_group: str, job: str, min_executions: int, replica_timeout_s: int
    ) -> None: ...  # an Event job's minExecutions (PATCH; replicaTimeout: required, as it is)
    def delete_job(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None: ...
    def start_job(
        self, resource_group: str, job: str, template: Sequence[ContainerDef] | None = None
    ) -> str: ...  # returns the execution name; `template`: this execution's own containers
    def get_execution(self, resource_group: str, job: str, execution: str) -> ExecutionInfo: ...
    def list_executions(self, resource_group: str, job: str) -> list[ExecutionInfo]: ...
    def start_job_marked(
        self,
        resource_group: str,
        job: str,
        template: Sequence[ContainerDef] | None,
        *,
        key: str,
        token: str,
        cancel: threading.Event | None = None,
    ) -> MarkedStart: ...  # found again by `key=token` in its env (None: the job's own template's)
    def executions_marked(
        self, resource_group: str, job: str, key: str, tokens: Collection[str], *, every: bool = False
    ) -> list[ExecutionInfo]: ...  # newest first, paged only until every token's execution was seen
    # (`every`: every page, where a token may be on two executions)
    def stop_execution(self, resource_group: str, job: str, execution: str) -> None: ...
    def environment_usages(self, resource_group: str, environment: str) -> list[UsageInfo]: ...
    def make_share_folders(
        self, resource_group: str, account: str, share: str, folders: Sequence[str]
    ) -> None: ...
    def download_share_folders(
        self,
        resource_group: str,
        account: str,
        share: str,
        folders: Mapping[str, Path],
        on_retry: Callable[[str], None] | None = None,
    ) -> ShareDownload: ...  # each share folder's files under its local folder (Azure Files data plane)
    def list_execution_replicas(self, resource_group: str, job: str, execution: str) -> list[ReplicaInfo]: ...
    def environment_storages(self, resource_group: str, environment: str) -> list[str]: ...
    def get_storage_account(self, resource_group: str, name: str) -> StorageAccountInfo | None: ...
    def queues(self, resource_group: str, account: str) -> Queues: ...
    # role assignments at one queue's scope (queue mode's workers: docs/queue.md)
    def may_assign_roles(self, resource_group: str) -> bool | None: ...  # None: ARM did not say
    def grant_queue_role(
        self, resource_group: str, account: str, queue: str, role: str, principal_id: str, description: str
    ) -> str: ...  # the assignment's id; granting it again changes nothing
    def queue_role_assignments(
        self, resource_group: str, account: str, queue: str
    ) -> list[RoleAssignmentInfo]: ...  # those at the queue's own scope
    def delete_role_assignment(self, assignment_id: str) -> None: ...  # a missing one is no error
    def grant_job_role(
        self, resource_group: str, job: str, principal_id: str, description: str
    ) -> str: ...  # Contributor at the job's own scope (a warm floor's worker drops its floor)
    def job_role_assignments(self, resource_group: str, job: str) -> list[RoleAssignmentInfo]: ...
    def arm_base(self) -> str: ...  # the ARM endpoint this cloud speaks to (a worker calls the same)
    def create_storage_account(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> StorageAccountInfo: ...
    def file_share_exists(self, resource_group: str, account: str, share: str) -> bool: ...
    def create_file_share(self, resource_group: str, account: str, share: str, quota_gib: int) -> None: ...
    def set_environment_file_storage(
        self, resource_group: str, environment: str, storage_name: str, mount: ShareMount
    ) -> None: ...

    # data plane
    def exec(
        self, resource_group: str, app: str, argv: Sequence[str], *, timeout: float = 120.0
    ) -> ExecResult: ...
    def app_logs(
        self,
        resource_group: str,
        app: str,
        *,
        follow: bool = False,
        tail: int = 20,
        stop_when: Callable[[str], bool] | None = None,
        timeout: float = 600.0,
    ) -> Iterator[str]: ...
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
    ) -> Iterator[str]: ...
    def job_log_records(
        self,
        resource_group: str,
        job: str,
        execution: str,
        *,
        timeout: float = 600.0,
        on_running: Callable[..., None] | None = None,
        on_closed: Callable[[], None] | None = None,  # the service ended a connection: its container exited
        on_late: Callable[[], None] | None = None,  # attached after its container had started
    ) -> Iterator[tuple[str | None, str, str]]: ...  # (timestamp, stdout|stderr, line), followed
    def ensure_logs_workspace(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> LogsDestination: ...  # a Log Analytics workspace (made or found) for an environment's lines
    def console_lines(
        self, workspace_id: str, job: str, execution: str
    ) -> list[tuple[str | None, str, str]]: ...  # (timestamp, stream, line) the workspace has so far
    def execution_end_logged(
        self, workspace_id: str, job: str, execution: str
    ) -> bool: ...  # the workspace has the platform's record of the execution's end (a watermark)
    def system_events(
        self, resource_group: str, *, app: str | None = None, environment: str | None = None, tail: int = 50
    ) -> list[dict[str, Any]]: ...
