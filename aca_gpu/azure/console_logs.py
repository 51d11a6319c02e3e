"""Console lines of an app or a job execution, and system events, read from ACA's log streams.

The stream endpoint is listed with the replica's container, so each read first waits for that
container (an app's to run; an execution's to be listed, as early as its image pull), then hands
the endpoint to `logstream`, which reconnects and de-duplicates. A job execution's stream ends when
the execution does: `ExecutionLog` holds what both of its readers (lines, records) share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from aca_gpu.azure import apps, job_executions, logstream, preview
from aca_gpu.azure.clients import Clients
from aca_gpu.azure.replica_exec import RUNNING, Pace, running_container
from aca_gpu.errors import BadInput, InfraError, NotFound, WaitTimedOut
from aca_gpu.models import ReplicaContainerInfo, ReplicaInfo

TOKEN_REUSE_S = 45 * 60  # ACA data-plane tokens live 1 h (getAuthToken's `expires`)
REPLICA_LOOKUP_S = 1.0
STARTED = {RUNNING, "terminated"}  # a container in either state has run: it bills from its start


class TokenCache:
    """A data-plane token fetched once and reused while it is young: a stream reconnects often."""

    def __init__(self, fetch: Callable[[], str], clock: Callable[[], float]) -> None:
        self._fetch = fetch
        self._clock = clock
        self._value: str | None = None
        self._at = 0.0

    def __call__(self) -> str:
        if self._value is None or self._clock() - self._at > TOKEN_REUSE_S:
            self._value = self._fetch()
            self._at = self._clock()
        return self._value

    def __repr__(self) -> str:
        return "TokenCache(<hidden>)"


def app_lines(
    clients: Clients,
    pace: Pace,
    resource_group: str,
    app: str,
    *,
    follow: bool,
    tail: int,
    stop_when: Callable[[str], bool] | None,
    timeout: float,
) -> Iterator[str]:
    """Console lines of the app's running replica, from `tail` lines back (followed if `follow`)."""
    deadline = pace.clock() + timeout
    _, container = running_container(clients, pace, resource_group, app, timeout=timeout, need="logs")
    token = TokenCache(lambda: apps.app_token(clients, resource_group, app), pace.clock)
    yield from logstream.follow_lines(
        str(container.log_stream_endpoint),
        token,
        follow=follow,
        tail=tail,
        what=f"the awaited log line from app {app}",
        verify=clients.verify,
        stop_when=stop_when,
        timeout=pace.until(deadline),
        sleep=pace.sleep,
    )


class ExecutionLog:
    """One job execution's console stream: where it is attached, its token, and when it is over."""

    def __init__(self, clients: Clients, pace: Pace, resource_group: str, job: str, execution: str) -> None:
        self.clients = clients
        self.pace = pace
        self.resource_group = resource_group
        self.job = job
        self.execution = execution
        self.token = TokenCache(lambda: preview.job_token(clients, resource_group, job), pace.clock)

    def finished(self) -> bool:
        """The execution says it ended, or its replica is gone (the stream has nothing more)."""
        if job_executions.get_execution(self.clients, self.resource_group, self.job, self.execution).finished:
            return True
        return not self._replicas()

    def _replicas(self) -> list[ReplicaInfo]:
        return preview.list_execution_replicas(self.clients, self.resource_group, self.job, self.execution)

    def container(self, deadline: float, what: str, *, early: bool = False) -> ReplicaContainerInfo | None:
        """Wait for the execution's replica container to run (`early`: to be listed with its log
        stream endpoint, as a replica still pulling its image is); None if the execution ended first."""
        last = "no replica yet"
        while True:
            for replica in self._replicas():
                for container in replica.containers:
                    state = (container.running_state or "").lower()
                    if container.log_stream_endpoint and (early or state in STARTED):
                        return container
                    last = f"replica {replica.name} container {container.name} is {container.running_state}"
            if job_executions.get_execution(
                self.clients, self.resource_group, self.job, self.execution
            ).finished:
                return None
            if self.pace.clock() >= deadline:
                raise WaitTimedOut(f"timed out waiting for {what}: {last}", code="ReplicaNotRunning")
            # a short job's replica may live only seconds: look for it more often than the usual poll
            self.pace.sleep(min(self.pace.poll, REPLICA_LOOKUP_S, max(0.0, deadline - self.pace.clock())))

    def lines(
        self,
        *,
        follow: bool,
        tail: int,
        stop_when: Callable[[str], bool] | None,
        timeout: float,
        on_running: Callable[..., None] | None,
    ) -> Iterator[str]:
        """See `AzureCloud.job_logs`."""
        deadline = self.pace.clock() + timeout
        what = f"the awaited log line from job {self.job} execution {self.execution}"
        # a follower attaches early; a one-off read (`logs --tester`) wants a container that ran
        container = self.container(deadline, what, early=follow)
        if container is None:
            return
        if on_running is not None and (container.running_state or "").lower() in STARTED:
            on_running()
        yield from logstream.follow_lines(
            str(container.log_stream_endpoint),
            self.token,
            follow=follow,
            tail=tail,
            what=what,
            verify=self.clients.verify,
            stop_when=stop_when,
            finished=self.finished,
            timeout=self.pace.until(deadline),
            sleep=self.pace.sleep,
            on_connected=on_running,
        )

    def records(
        self,
        *,
        timeout: float,
        on_running: Callable[..., None] | None,
        on_closed: Callable[[], None] | None,
        on_late: Callable[[], None] | None,
    ) -> Iterator[tuple[str | None, str, str]]:
        """See `AzureCloud.job_log_records`."""
        deadline = self.pace.clock() + timeout
        what = f"the log of job {self.job} execution {self.execution}"
        container = self.container(deadline, what, early=True)
        if container is None:
            raise InfraError(
                f"the log stream of {what} could not be attached before its replica ended",
                code="LogStreamLost",
            )
        if (container.running_state or "").lower() in STARTED:
            if on_late is not None:
                on_late()
            if on_running is not None:
                on_running()
        yield from logstream.follow_records(
            str(container.log_stream_endpoint),
            self.token,
            follow=True,
            tail=logstream.MAX_TAIL,
            what=what,
            verify=self.clients.verify,
            finished=self.finished,
            timeout=self.pace.until(deadline),
            sleep=self.pace.sleep,
            strict=True,
            on_connected=on_running,
            on_closed=on_closed,
        )


def system_events(
    clients: Clients, resource_group: str, *, app: str | None, environment: str | None, tail: int
) -> list[dict[str, Any]]:
    """A snapshot of the app's (or environment's) system events: AssigningReplica, pull errors..."""
    if app:
        info = apps.get_app(clients, resource_group, app)
        if info is None:
            raise NotFound(f"container app {app} not found in {resource_group}", code="ResourceNotFound")
        url, token = info.event_stream_endpoint, apps.app_token(clients, resource_group, app)
    elif environment:
        env = apps.get_environment(clients, resource_group, environment)
        if env is None:
            raise NotFound(
                f"environment {environment} not found in {resource_group}", code="ResourceNotFound"
            )
        url = env.event_stream_endpoint or env_eventstream_fallback(
            clients.subscription_id, resource_group, environment, env.location
        )
        token = apps.environment_token(clients, resource_group, environment)
    else:
        raise BadInput("system events need an app or an environment")
    if not url:
        return []
    return logstream.read_events(url, token, tail=tail, verify=clients.verify)


def env_eventstream_fallback(sub: str, rg: str, env: str, location: str) -> str:
    """The URL `az containerapp env logs show` builds when the environment reports no eventStreamEndpoint."""
    region = location.replace(" ", "").lower()
    return (
        f"https://{region}.azurecontainerapps.dev/subscriptions/{sub}/resourceGroups/{rg}"
        f"/managedEnvironments/{env}/eventstream"
    )
