"""Commands in an app's running replica: wait for its container, then exec through the data plane.

An exec (and an app's console stream) needs a container that runs and lists its endpoint, which a
fresh revision reaches only after its replica is assigned and its image pulled: the wait spans
many ARM reads, so it lives here with its deadline, not in azure-core's per-call retries. The
websocket itself is `dataplane`'s; this module picks the container and turns the transcript into
an `ExecResult` or one clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aca_gpu.azure import apps, dataplane
from aca_gpu.azure.clients import Clients
from aca_gpu.errors import BadInput, CloudError, NotFound, WaitTimedOut
from aca_gpu.models import ExecResult, ReplicaContainerInfo, ReplicaInfo

RUNNING = "running"


@dataclass(frozen=True)
class Pace:
    """How a wait over several calls passes time: injected so tests run a wait without sleeping."""

    sleep: Callable[[float], None]
    clock: Callable[[], float]
    poll: float  # the pause between two looks

    def until(self, deadline: float) -> float:
        """What is left before `deadline`, at least 1 s: a last call still gets time to answer."""
        return max(1.0, deadline - self.clock())


def app_replicas(clients: Clients, resource_group: str, app: str) -> list[ReplicaInfo]:
    """Replicas of the app's latest revision (empty while no revision exists yet)."""
    info = apps.get_app(clients, resource_group, app)
    if info is None:
        raise NotFound(f"container app {app} not found in {resource_group}", code="ResourceNotFound")
    if not info.latest_revision:
        return []
    return apps.list_revision_replicas(clients, resource_group, app, info.latest_revision)


def running_container(
    clients: Clients, pace: Pace, resource_group: str, app: str, *, timeout: float, need: str = "exec"
) -> tuple[ReplicaInfo, ReplicaContainerInfo]:
    """The latest revision's first replica's first container, once it is Running with an endpoint
    (`need`: "exec" or "logs", the endpoint the caller will use)."""
    deadline = pace.clock() + timeout
    last = "no replica yet"
    while True:
        for replica in app_replicas(clients, resource_group, app):
            for container in replica.containers:
                endpoint = container.exec_endpoint if need == "exec" else container.log_stream_endpoint
                if (container.running_state or "").lower() == RUNNING and endpoint:
                    return replica, container
                last = f"replica {replica.name} container {container.name} is {container.running_state}"
                if container.details:
                    last += f" ({container.details})"
            if not replica.containers:
                last = f"replica {replica.name} is {replica.running_state}"
            break  # the first replica is the one the CLI picks too
        if pace.clock() >= deadline:
            raise WaitTimedOut(
                f"timed out after {timeout:.0f}s waiting for a running replica of {app}: {last}",
                code="ReplicaNotRunning",
            )
        pace.sleep(min(pace.poll, max(0.0, deadline - pace.clock())))


def exec_shell(
    clients: Clients, pace: Pace, resource_group: str, app: str, argv: Sequence[str], timeout: float
) -> ExecResult:
    """Run argv through `sh` in the app's replica; `timeout` covers the replica wait and the command.
    The script brackets the command with a nonce so its exit code is read back from the transcript."""
    if not argv:
        raise BadInput("exec needs a command")
    deadline = pace.clock() + timeout
    _, container = running_container(clients, pace, resource_group, app, timeout=timeout)
    token = apps.app_token(clients, resource_group, app)
    nonce = dataplane.new_nonce()
    transcript = dataplane.run_exec(
        str(container.exec_endpoint),
        token,
        command="sh",
        stdin=dataplane.shell_script(argv, nonce),
        nonce=nonce,
        verify=clients.verify,
        timeout=pace.until(deadline),
    )
    _raise_exec_errors(app, transcript)
    output, code = dataplane.clean_transcript(transcript.stdout, nonce)
    return ExecResult(tuple(argv), output, dataplane.clean_stderr(transcript.stderr), code)


def exec_raw(
    clients: Clients, pace: Pace, resource_group: str, app: str, command: str, timeout: float
) -> ExecResult:
    """Run ONE executable with no arguments directly as the exec `command` (no exit code comes back)."""
    deadline = pace.clock() + timeout
    _, container = running_container(clients, pace, resource_group, app, timeout=timeout)
    token = apps.app_token(clients, resource_group, app)
    transcript = dataplane.run_exec(
        str(container.exec_endpoint),
        token,
        command=command,
        verify=clients.verify,
        timeout=pace.until(deadline),
    )
    _raise_exec_errors(app, transcript)
    stdout = transcript.stdout.replace("\r\n", "\n")
    return ExecResult((command,), stdout, dataplane.clean_stderr(transcript.stderr), None)


def _raise_exec_errors(app: str, transcript: dataplane.Transcript) -> None:
    """An error frame from the service is the exec's failure: ClusterExecFailure (no such executable,
    no shell in the image) keeps its code so a caller can tell it from a broken connection."""
    if transcript.errors:
        message = dataplane.error_message(transcript.errors)
        code = "ClusterExecFailure" if "ClusterExecFailure" in message else "ExecError"
        raise CloudError(f"exec in {app} failed: {message}", code=code)
