"""The emulated subscription's state. Only the server's event loop touches it (no locks needed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aca_gpu.emulator.arm import utc_now
from aca_gpu.emulator.workloads.base import Container, ContainerSpec

RUN_ID_TAG = "acagpu:run-id"


@dataclass
class Provider:
    namespace: str
    state: str = "NotRegistered"  # NotRegistered | Registering | Registered
    registered_at: float | None = None  # monotonic time Registering becomes Registered


@dataclass
class ResourceGroup:
    name: str
    location: str
    tags: dict[str, str]
    deleting: bool = False
    delete_done_at: float | None = None  # set once the contained environments are gone


@dataclass
class Environment:
    rg: str
    name: str
    location: str  # normalized
    tags: dict[str, str]
    profiles: list[dict[str, Any]]
    ready_at: float
    created: datetime
    default_domain: str
    static_ip: str
    deleting: bool = False
    delete_done_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # writable properties echoed back
    updating: bool = False  # ready_at belongs to an update (new profile nodes), not the create
    # (profile type, image) -> monotonic time its last pull ended: nodes keep what they pulled
    pulled: dict[tuple[str, str], float] = field(default_factory=dict)
    storages: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"azureFile": {...}}
    identity: dict[str, Any] = field(default_factory=lambda: {"type": "None"})  # the environment's own

    @property
    def consumption_only(self) -> bool:
        """Created without workload profiles: Azure's original environment kind (the guard uses one)."""
        return not self.profiles

    def profile_type(self, profile_name: str | None) -> str | None:
        name = (profile_name or "Consumption").lower()
        for p in self.profiles:
            if str(p.get("name", "")).lower() == name:
                return str(p.get("workloadProfileType"))
        return None


@dataclass
class StorageAccount:
    """A Microsoft.Storage account: its keys (answered only by listKeys) and its Azure Files shares."""

    rg: str
    name: str
    location: str  # normalized
    tags: dict[str, str]
    sku: str
    kind: str
    created: datetime
    ready_at: float  # monotonic time its create ends
    keys: tuple[str, str] = field(repr=False)
    shares: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"shareQuota", ...}


@dataclass
class StagedImage:
    """One repository:tag of a registry: what an import brought (digest, size) and its streaming
    artifact's conversion (none until requested, Running until `streaming_ready_at`, then Succeeded)."""

    source: str
    digest: str
    size_bytes: int
    imported_at: float  # monotonic time the import finished
    streaming_ready_at: float | None = None
    streaming_op: str = ""  # the conversion operation's id, once one was requested
    streaming_from: float = 0.0  # monotonic time it was requested (its progress)
    streaming_fails: bool = False  # a `conversion` fault: it ends Failed


@dataclass
class Registry:
    """A Microsoft.ContainerRegistry registry: its SKU and the images imported into it."""

    rg: str
    name: str
    location: str  # normalized
    tags: dict[str, str]
    sku: str
    created: datetime
    ready_at: float
    images: dict[str, StagedImage] = field(default_factory=dict)  # "repo:tag" (lower) -> image
    streaming: set[str] = field(default_factory=set)  # repositories that convert what is pushed

    @property
    def login_server(self) -> str:
        return f"{self.name.lower()}.azurecr.io"


@dataclass
class LogLine:
    at: datetime
    text: str
    stream: str = "stdout"  # stdout | stderr, as the CRI text form of the log stream names it


@dataclass
class Replica:
    name: str
    kind: str  # "app" | "job"
    owner: str  # app or job name
    parent: str  # revision or execution name
    rg: str
    env: str
    env_rg: str
    profile_type: str
    specs: list[ContainerSpec]
    run_id: str | None
    created: datetime = field(default_factory=utc_now)
    phase: str = "AssigningReplica"  # AssigningReplica|PullingImage|Starting|Running|Waiting|Terminated
    phase_until: float | None = None
    stuck: bool = False
    handles: dict[str, Container] = field(default_factory=dict)
    restart_count: int = 0
    started_at: datetime | None = None
    details: str = ""
    exit_code: int | None = None
    logs: dict[str, list[LogLine]] = field(default_factory=dict)
    log_base: dict[str, int] = field(default_factory=dict)  # where the current container's lines begin
    billing: BillingRecord | None = None
    retry_limit: int | None = None  # jobs: replicaRetryLimit; apps restart forever
    gone: bool = False
    pull_s: list[float] = field(default_factory=list)  # emulated seconds each container's pull took
    pulls: list[Any] = field(default_factory=list)  # pulls.PullPlan per container, made when the pull began
    oom: bool = False  # the `oom` fault: a served replica's container is killed for memory as it starts
    probe_fault: str = ""  # the `probe` fault: why every look of its startup probe fails
    unhealthy: str = ""  # its startup probe's last failed look, until a look passes (revision health)
    lost_at: float | None = None  # the `lost` fault: monotonic time its node goes away (placement.py)


@dataclass
class Revision:
    name: str
    template: dict[str, Any]
    created: datetime
    active: bool = True
    replicas: dict[str, Replica] = field(default_factory=dict)
    scale_in_at: float | None = None  # minReplicas == 0: the replica leaves after the cooldown
    unplaced: int = 0  # replicas the revision counts but no node could take (`nocapacity`)


@dataclass
class App:
    rg: str
    name: str
    location: str
    tags: dict[str, str]
    env: str
    env_rg: str  # the environment's resource group: Azure lets it differ from the resource's own
    profile_name: str | None
    profile_type: str
    configuration: dict[str, Any]
    template: dict[str, Any]
    created: datetime
    provisioned_at: float
    latest_revision: str = ""
    ready_revision: str = ""  # the newest revision that finished provisioning (latestReadyRevisionName)
    revisions: dict[str, Revision] = field(default_factory=dict)
    stopped: bool = False
    deleting: bool = False
    delete_done_at: float | None = None
    identity: dict[str, Any] = field(default_factory=lambda: {"type": "None"})
    placement: str = ""  # "" | "wpfull" | "nocapacity": a placement fault fired at its create


@dataclass
class Execution:
    name: str
    template: dict[str, Any]
    started: datetime
    status: str = "Running"  # Running | Succeeded | Failed | Stopped
    ended: datetime | None = None
    replicas: dict[str, Replica] = field(default_factory=dict)
    replica_names: list[str] = field(default_factory=list)  # kept for detailedStatus after removal
    codes: dict[str, int | None] = field(default_factory=dict)
    attempts: int = 0
    deadline: float | None = None
    # the same replica timeout in real seconds: a replica whose containers run real processes (a
    # `sh -c` line, Podman) keeps real minutes, as `--max-minutes` promises it
    real_deadline: float | None = None
    reason: str | None = None
    message: str | None = None
    linger_until: float | None = None  # monotonic time the ended replica is cleaned up
    console: list[LogLine] = field(default_factory=list)  # what its containers printed, kept after it ends
    trigger: str = "Manual"  # Manual | Schedule: who started it
    # (status, until): an `unknown` or `processing` fault's status, answered until then (placement.py)
    reported: tuple[str, float] | None = None


@dataclass
class Job:
    rg: str
    name: str
    location: str
    tags: dict[str, str]
    env: str
    env_rg: str  # the environment's resource group: Azure lets it differ from the resource's own
    profile_name: str | None
    profile_type: str
    configuration: dict[str, Any]
    template: dict[str, Any]
    created: datetime
    provisioned_at: float
    executions: dict[str, Execution] = field(default_factory=dict)
    deleting: bool = False
    delete_done_at: float | None = None
    identity: dict[str, Any] = field(default_factory=lambda: {"type": "None"})
    schedule_mark: datetime | None = None  # the last emulated minute the schedule trigger looked at
    poll_at: float | None = None  # an Event job's next KEDA poll (clock time; providers/app/keda.py)
    queue_seen: bool = False  # a poll found messages on its queue (an emptied queue's `empty_poll`)


@dataclass
class Principal:
    """A system-assigned managed identity: its object id and the IDENTITY_HEADER secret that its
    containers present to the token endpoint."""

    principal_id: str
    secret: str
    resource_id: str


@dataclass
class Operation:
    """An LRO; `check()` derives its status from the resource it tracks, so it is always current."""

    id: str
    kind: str  # status resource type, e.g. managedEnvironmentOperationStatuses
    location: str
    started: datetime
    check: Callable[[], str]  # -> InProgress | Succeeded | Failed
    final_status: int = 204  # Location-style result once done
    result: Callable[[], Any] | None = None  # body of that final result, if any


@dataclass
class Event:
    at: datetime
    env: str
    rg: str
    env_rg: str  # where the environment lives; `rg` is the app's or job's own group
    app: str | None
    revision: str
    replica: str
    msg: str
    reason: str
    type: str = "Normal"
    count: int = 1


@dataclass
class BillingRecord:
    run_id: str | None
    kind: str
    resource: str
    parent: str
    replica: str
    profile_type: str
    gpus: int
    started_wall: float
    ended_wall: float | None = None
    # what Cost Management prices and groups by: where it ran, its size, the resource's tags
    resource_group: str = ""
    location: str = ""
    vcpu: float = 0.0
    memory_gib: float = 0.0
    tags: dict[str, str] = field(default_factory=dict)
    stalled: bool = False  # billed from the image pull while the container was not created
    # a real process (a `sh -c` job line) lives in real seconds, not on the scaled clock
    real_time: bool = False


@dataclass
class State:
    providers: dict[str, Provider] = field(default_factory=dict)
    rgs: dict[str, ResourceGroup] = field(default_factory=dict)
    envs: dict[tuple[str, str], Environment] = field(default_factory=dict)
    apps: dict[tuple[str, str], App] = field(default_factory=dict)
    jobs: dict[tuple[str, str], Job] = field(default_factory=dict)
    operations: dict[str, Operation] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    billing: list[BillingRecord] = field(default_factory=list)
    principals: dict[str, Principal] = field(default_factory=dict)  # principal id -> identity
    role_definitions: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom roles by id (lower)
    role_assignments: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id (lower)
    # by id (lower): the clock time (Clock.now) from which an assignment grants its role (propagation)
    role_assignments_effective: dict[str, float] = field(default_factory=dict)
    storage_accounts: dict[tuple[str, str], StorageAccount] = field(default_factory=dict)  # key(rg, name)
    registries: dict[tuple[str, str], Registry] = field(default_factory=dict)  # key(rg, name)
    # Log Analytics workspaces, key(rg, name): providers/operationalinsights/models.py Workspace
    log_workspaces: dict[tuple[str, str], Any] = field(default_factory=dict)

    def provider(self, namespace: str) -> Provider:
        key = namespace.lower()
        if key not in self.providers:
            self.providers[key] = Provider(namespace)
        return self.providers[key]

    def replicas(self) -> list[Replica]:
        found: list[Replica] = []
        for app in self.apps.values():
            for rev in app.revisions.values():
                found.extend(rev.replicas.values())
        for job in self.jobs.values():
            for ex in job.executions.values():
                found.extend(ex.replicas.values())
        return found


def key(rg: str, name: str) -> tuple[str, str]:
    return rg.lower(), name.lower()


def in_env(item: App | Job | Replica | Event, env: Environment) -> bool:
    """Does this app, job, replica or event belong to the environment (whatever group it sits in)?"""
    return item.env_rg.lower() == env.rg.lower() and item.env.lower() == env.name.lower()
