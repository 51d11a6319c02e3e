"""A small stateful ARM + ACA double behind an autospec of `AzureCloud`.

The autospec checks every call against the real adapter's signatures (a renamed parameter fails
here too); the state behind it makes get-before-create, resume and "gone after delete" real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock, create_autospec

from aca_gpu.azure.cloud import AzureCloud
from aca_gpu.models import (
    AppInfo,
    AppSpec,
    Cloud,
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
    ReplicaContainerInfo,
    ReplicaInfo,
    ResourceGroupInfo,
    ShareDownload,
    ShareMount,
    StorageAccountInfo,
    SubscriptionInfo,
    UsageInfo,
)
from aca_gpu.workflow.base import checks
from aca_gpu.workflow.engine import probe_job

SMI_T4 = """Wed Apr 17 22:01:19 2024
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.54.03              Driver Version: 535.54.03    CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  Tesla T4                       On  | 00000001:00:00.0 Off |                    0 |
| N/A   28C    P0              26W /  70W |      4MiB / 15360MiB |      0%      Default |
|                                         |                      |                  N/A |
+-----------------------------------------+----------------------+----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|  No running processes found                                                           |
+---------------------------------------------------------------------------------------+
"""
SMI_CSV = "name, driver_version, memory.total [MiB], uuid\nTesla T4, 535.54.03, 15360 MiB, GPU-1234\n"
PASS_DOC = {"status": "pass", "gpu": {"name": "Tesla T4", "count": 1}, "tflops": {"fp16": 40.0}}

METHODS = sorted(n for n, v in vars(Cloud).items() if callable(v) and not n.startswith("_"))


@dataclass
class FakeCloud:
    """State plus knobs for the scenarios the workflow tests need."""

    registered: bool = True
    offers: tuple[str, ...] = ("Consumption", "Consumption-GPU-NC8as-T4", "Consumption-GPU-NC24-A100")
    groups: dict[str, ResourceGroupInfo] = field(default_factory=dict)
    envs: dict[tuple[str, str], EnvInfo] = field(default_factory=dict)
    apps: dict[tuple[str, str], AppInfo] = field(default_factory=dict)
    jobs: dict[tuple[str, str], JobInfo] = field(default_factory=dict)
    executions: dict[tuple[str, str], list[ExecutionInfo]] = field(default_factory=dict)
    replica_running: bool = True  # False: replicas stay in AssigningReplica
    tester_doc: dict[str, Any] = field(default_factory=lambda: dict(PASS_DOC))
    smi_text: str = SMI_T4
    exec_exit: int = 0
    # the tester stays its result grace: its execution runs on after the result line until stopped
    linger: bool = False
    stopped_codes: tuple[int, ...] | None = None  # what a stopped execution states (None: its verdict)
    delete_sticks: bool = False  # the group never goes away
    barrier: threading.Barrier | None = None  # proves explorer and tester start concurrently
    on_job_logs: Callable[[], None] | None = None
    on_exec: Callable[[], None] | None = None
    on_delete: Callable[[], None] | None = None

    # subscription
    def provider_registered(self, namespace: str) -> bool:
        return self.registered

    def register_provider(self, namespace: str, *, timeout: float) -> None:
        self.registered = True

    def available_profiles(self, location: str) -> list[ProfileOffer]:
        def offer(name: str) -> ProfileOffer:
            gpu = "GPU" in name or "A100" in name
            return ProfileOffer(
                name, "GPU" if gpu else "Consumption", 8 if gpu else 4, 56 if gpu else 8, 1 if gpu else None
            )

        return [offer(o) for o in self.offers]

    def usages(self, location: str) -> list[UsageInfo]:
        return []

    def identity(self) -> IdentityInfo:
        return IdentityInfo("user", "tenant", "object", "someone@example.com")

    def subscription(self) -> SubscriptionInfo:
        return SubscriptionInfo(
            self.subscription_id if hasattr(self, "subscription_id") else "sub", "test", "Enabled"
        )

    # groups
    def create_resource_group(self, name: str, location: str, tags: Mapping[str, str]) -> ResourceGroupInfo:
        self.groups[name] = ResourceGroupInfo(name, location, dict(tags), "Succeeded")
        return self.groups[name]

    def get_resource_group(self, name: str) -> ResourceGroupInfo | None:
        return self.groups.get(name)

    def list_resource_groups(
        self, tag_name: str | None = None, tag_value: str | None = None
    ) -> list[ResourceGroupInfo]:
        return [
            g
            for g in self.groups.values()
            if tag_name is None
            or (g.tags.get(tag_name) == tag_value if tag_value is not None else tag_name in g.tags)
        ]

    def delete_resource_group(self, name: str, *, wait: bool = True) -> None:
        if self.on_delete:
            self.on_delete()
        if self.delete_sticks:
            return
        self.groups.pop(name, None)
        for table in (self.envs, self.apps, self.jobs, self.executions):
            for key in [k for k in table if k[0] == name]:
                del table[key]

    # env, app, job
    def create_environment(self, spec: EnvSpec) -> EnvInfo:
        env = EnvInfo(
            f"/envs/{spec.name}",
            spec.name,
            spec.resource_group,
            spec.location,
            "Succeeded",
            logs_workspace=spec.logs.workspace_id if spec.logs else None,
        )
        self.envs[(spec.resource_group, spec.name)] = env
        return env

    def get_environment(self, resource_group: str, name: str) -> EnvInfo | None:
        return self.envs.get((resource_group, name))

    def create_app(self, spec: AppSpec) -> AppInfo:
        if self.barrier:
            self.barrier.wait()
        app = AppInfo(
            f"/apps/{spec.name}", spec.name, spec.resource_group, "Succeeded", "Running", "rev1", None, 1, 1
        )
        self.apps[(spec.resource_group, spec.name)] = app
        return app

    def get_app(self, resource_group: str, name: str) -> AppInfo | None:
        return self.apps.get((resource_group, name))

    def scale_app(self, resource_group: str, name: str, min_replicas: int, max_replicas: int) -> AppInfo:
        app = replace(self.apps[(resource_group, name)], min_replicas=min_replicas, max_replicas=max_replicas)
        self.apps[(resource_group, name)] = app
        return app

    def list_apps(self, resource_group: str) -> list[AppInfo]:
        return [a for (rg, _), a in self.apps.items() if rg == resource_group]

    def delete_app(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None:
        self.apps.pop((resource_group, name), None)
        if on_accepted is not None:
            on_accepted()

    def stop_app(self, resource_group: str, name: str) -> None:
        app = self.apps[(resource_group, name)]
        self.apps[(resource_group, name)] = replace(app, running_status="Stopped")

    def start_app(self, resource_group: str, name: str) -> None:
        app = self.apps[(resource_group, name)]
        self.apps[(resource_group, name)] = replace(app, running_status="Running")

    def list_jobs(self, resource_group: str) -> list[JobInfo]:
        return [j for (rg, _), j in self.jobs.items() if rg == resource_group]

    def set_event_floor(
        self, resource_group: str, job: str, min_executions: int, replica_timeout_s: int
    ) -> None:
        return None

    def delete_job(
        self, resource_group: str, name: str, *, on_accepted: Callable[[], None] | None = None
    ) -> None:
        self.jobs.pop((resource_group, name), None)
        self.executions.pop((resource_group, name), None)
        if on_accepted is not None:
            on_accepted()

    def _replica(self) -> ReplicaInfo:
        if self.replica_running:
            return ReplicaInfo("r1", "Running", (ReplicaContainerInfo("c", "Running"),))
        return ReplicaInfo(
            "r1", "NotRunning", (ReplicaContainerInfo("c", "Waiting"),), details="AssigningReplica"
        )

    def list_app_replicas(self, resource_group: str, app: str) -> list[ReplicaInfo]:
        found = self.apps.get((resource_group, app))
        return [self._replica()] if found and found.running_status != "Stopped" else []

    def create_job(self, spec: JobSpec) -> JobInfo:
        if self.barrier:
            self.barrier.wait()
        job = JobInfo(f"/jobs/{spec.name}", spec.name, spec.resource_group, "Succeeded")
        self.jobs[(spec.resource_group, spec.name)] = job
        return job

    def get_job(self, resource_group: str, name: str) -> JobInfo | None:
        return self.jobs.get((resource_group, name))

    def start_job(self, resource_group: str, job: str, template: Any = None) -> str:
        runs = self.executions.setdefault((resource_group, job), [])
        name = f"{job}-exec{len(runs) + 1}"
        runs.append(ExecutionInfo(name, "Running", "2026-11-22T12:00:00Z"))
        return name

    def _set_status(self, resource_group: str, job: str, execution: str, status: str) -> None:
        runs = self.executions[(resource_group, job)]
        for i, info in enumerate(runs):
            if info.name == execution and not info.finished:
                codes = (0,) if self.tester_doc.get("status") == "pass" else (1,)
                if status == "Stopped" and self.stopped_codes is not None:
                    codes = self.stopped_codes
                runs[i] = replace(info, status=status, end_time="2026-11-22T12:01:00Z", exit_codes=codes)

    def get_execution(self, resource_group: str, job: str, execution: str) -> ExecutionInfo:
        return next(e for e in self.executions[(resource_group, job)] if e.name == execution)

    def list_executions(self, resource_group: str, job: str) -> list[ExecutionInfo]:
        return list(self.executions.get((resource_group, job), []))

    def list_execution_replicas(self, resource_group: str, job: str, execution: str) -> list[ReplicaInfo]:
        return [self._replica()]

    # fan-out (workflow/fanout/): an execution per shard, matched by the token in its env
    def start_job_marked(
        self,
        resource_group: str,
        job: str,
        template: Sequence[Any] | None,
        *,
        key: str,
        token: str,
        cancel: threading.Event | None = None,
    ) -> MarkedStart:
        runs = self.executions.setdefault((resource_group, job), [])
        name = f"{job}-exec{len(runs) + 1}"
        runs.append(ExecutionInfo(name, "Running", "2026-11-22T12:00:00Z", env={key: token}))
        return MarkedStart(name)

    def executions_marked(
        self, resource_group: str, job: str, key: str, tokens: Collection[str], *, every: bool = False
    ) -> list[ExecutionInfo]:
        return self.list_executions(resource_group, job)

    def stop_execution(self, resource_group: str, job: str, execution: str) -> None:
        self._set_status(resource_group, job, execution, "Stopped")

    def environment_usages(self, resource_group: str, environment: str) -> list[UsageInfo]:
        return []

    def make_share_folders(
        self, resource_group: str, account: str, share: str, folders: Sequence[str]
    ) -> None:
        return None

    def download_share_folders(
        self,
        resource_group: str,
        account: str,
        share: str,
        folders: Mapping[str, Path],
        on_retry: Callable[[str], None] | None = None,
    ) -> ShareDownload:
        return ShareDownload()

    # data plane
    def exec(
        self, resource_group: str, app: str, argv: Sequence[str], *, timeout: float = 120.0
    ) -> ExecResult:
        if self.on_exec:
            self.on_exec()
        if list(argv) == ["nvidia-smi"]:
            return ExecResult(tuple(argv), self.smi_text, "", 0)
        if argv and argv[0] == "nvidia-smi":
            return ExecResult(tuple(argv), SMI_CSV, "", 0)
        return ExecResult(tuple(argv), "hello\n", "", self.exec_exit)

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
        yield from ["explorer line 1", "explorer line 2"][-tail:] if tail else []

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
        on_running: Callable[[], None] | None = None,
    ) -> Iterator[str]:
        if job.startswith(
            "cuda-probe-"
        ):  # the probe job's command: nvidia-smi, query, -q, each with its status
            if not self.replica_running:
                return  # a container that never runs prints nothing (its stream waits for it)
            yield from self._probe_lines()  # through exec: its knobs (on_exec, smi_text) apply
            self._set_status(resource_group, job, execution, "Succeeded")
            return
        if self.on_job_logs:
            self.on_job_logs()
        if on_running is not None:
            on_running()
        yield "CUDA is available. Running on GPU."
        yield "ACAGPU_RESULT " + json.dumps(self.tester_doc)
        if not self.linger:
            self._set_status(resource_group, job, execution, "Succeeded")

    def _probe_lines(self) -> Iterator[str]:
        table = self.exec("rg", "probe", ["nvidia-smi"])
        query = self.exec("rg", "probe", list(checks.SMI_QUERY))
        yield from table.output.splitlines()
        yield f"{probe_job.TABLE_END}{table.exit_code}"
        yield from query.output.splitlines()
        yield f"{probe_job.QUERY_END}{query.exit_code}"
        yield f"{probe_job.HEALTH_END}0"

    def job_log_records(
        self,
        resource_group: str,
        job: str,
        execution: str,
        *,
        timeout: float = 600.0,
        on_running: Callable[[], None] | None = None,
        on_closed: Callable[[], None] | None = None,
        on_late: Callable[[], None] | None = None,
    ) -> Iterator[tuple[str | None, str, str]]:
        for line in self.job_logs(resource_group, job, execution, on_running=on_running):
            yield None, "stdout", line
        if on_closed is not None:
            on_closed()

    def system_events(
        self, resource_group: str, *, app: str | None = None, environment: str | None = None, tail: int = 50
    ) -> list[dict[str, Any]]:
        return [{"Reason": "AssigningReplica", "Msg": "Replica is being assigned to a GPU node"}]

    def environment_storages(self, resource_group: str, environment: str) -> list[str]:
        return []

    # Log Analytics: where an environment's console lines stay (a run reads them when the stream missed)
    def ensure_logs_workspace(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> LogsDestination:
        return LogsDestination(f"ws-{name}", "fake-key")

    def console_lines(self, workspace_id: str, job: str, execution: str) -> list[tuple[str | None, str, str]]:
        return []

    def execution_end_logged(self, workspace_id: str, job: str, execution: str) -> bool:
        return True

    # storage (`acagpu run --create-share`): the workflow tests here make none
    def get_storage_account(self, resource_group: str, name: str) -> StorageAccountInfo | None:
        return None

    def create_storage_account(
        self, resource_group: str, name: str, location: str, tags: Mapping[str, str]
    ) -> StorageAccountInfo:
        return StorageAccountInfo(name, resource_group, location, dict(tags), "Succeeded")

    def file_share_exists(self, resource_group: str, account: str, share: str) -> bool:
        return False

    def create_file_share(self, resource_group: str, account: str, share: str, quota_gib: int) -> None:
        return None

    def set_environment_file_storage(
        self, resource_group: str, environment: str, storage_name: str, mount: ShareMount
    ) -> None:
        return None

    def queues(self, resource_group: str, account: str) -> Any:
        """Queue mode is tested against the emulator (tests/e2e), not this fake: nothing here uses it."""
        raise AssertionError(f"the workflow fake has no storage queues ({account})")

    def may_assign_roles(self, resource_group: str) -> bool | None:
        return None

    def grant_queue_role(
        self, resource_group: str, account: str, queue: str, role: str, principal_id: str, description: str
    ) -> str:
        raise AssertionError(f"the workflow fake grants no role ({queue})")

    def queue_role_assignments(self, resource_group: str, account: str, queue: str) -> list[Any]:
        raise AssertionError(f"the workflow fake grants no role ({queue})")

    def delete_role_assignment(self, assignment_id: str) -> None:
        raise AssertionError(f"the workflow fake grants no role ({assignment_id})")

    def grant_job_role(self, resource_group: str, job: str, principal_id: str, description: str) -> str:
        raise AssertionError(f"the workflow fake grants no role ({job})")

    def job_role_assignments(self, resource_group: str, job: str) -> list[Any]:
        raise AssertionError(f"the workflow fake grants no role ({job})")

    def arm_base(self) -> str:
        return "https://management.azure.com"


def autospec_cloud(fake: FakeCloud) -> MagicMock:
    """An autospec of the real adapter whose methods run the fake's logic."""
    mock = create_autospec(AzureCloud, instance=True)
    mock.subscription_id = "00000000-0000-0000-0000-000000000000"
    for name in METHODS:
        getattr(mock, name).side_effect = getattr(fake, name)
    return mock


def call_names(mock: MagicMock) -> list[str]:
    return [c[0] for c in mock.mock_calls if c[0] in METHODS]
