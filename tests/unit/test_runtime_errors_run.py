"""`acagpu run`'s known failures: pull errors, out of memory, exec format, each in one line with its code.

The texts are the runtimes' and ACA's own (podman 4.3 as installed here, runc, ACA's system log as
users pasted it into microsoft/azure-container-apps issues).
"""

from __future__ import annotations

import io
import threading

import pytest

from aca_gpu.config import Settings
from aca_gpu.emulator import faults
from aca_gpu.errors import EXIT_BAD_INPUT, EXIT_GPU_CHECK, EXIT_INFRA
from aca_gpu.gpu import runtime_errors
from aca_gpu.models import ExecutionInfo
from aca_gpu.workflow.engine.outcome import NOTHING_CREATED
from aca_gpu.workflow.engine.tester_run import TesterRun
from aca_gpu.workflow.workload import explain
from aca_gpu.workflow.workload.aca import Where, Workload
from aca_gpu.workflow.workload.outcome import Console, WorkloadOutcome, WorkloadResult, render_run
from aca_gpu.workflow.workload.plan import RunRequest, make_run_spec

PODMAN_SHORT_NAME = (
    'Error: short-name "nosuchimage-acagpu-x" did not resolve to an alias and no unqualified-search '
    'registries are defined in "/etc/containers/registries.conf"'
)
PODMAN_REFUSED = (
    "Error: initializing source docker://localhost:1/nosuch:tag: pinging container registry "
    'localhost:1: Get "https://localhost:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused'
)
DOCKER_DENIED = (
    "docker: Error response from daemon: pull access denied for nosuch, repository does not exist or "
    "may require 'docker login': denied: requested access to the resource is denied."
)
ACA_PULL = (
    "ContainerTerminated: Container 'main' was terminated with exit code '' and reason 'ImagePullFailure'. "
    "Pull image: myacr.azurecr.io/train:9 failed with exit code: 1, error: failed to resolve reference "
    '"myacr.azurecr.io/train:9": myacr.azurecr.io/train:9: not found: manifest unknown'
)
ACA_PULL_DNS = ACA_PULL.replace(
    "myacr.azurecr.io/train:9: not found: manifest unknown",
    "dial tcp: lookup myacr.azurecr.io: no such host",
)
ACA_RATE_LIMIT = ACA_PULL.replace(
    "myacr.azurecr.io/train:9: not found: manifest unknown",
    "429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit",
)
ACA_OOM = "ContainerTerminated: Container 'main' was terminated with exit code '137' and reason 'OOMKilled'"
ACA_CUDA = (
    "ContainerCreateFailure: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0, "
    "please update your driver to a newer version"
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (PODMAN_SHORT_NAME, runtime_errors.IMAGE_PULL_FAILED),
        (PODMAN_REFUSED, runtime_errors.REGISTRY_UNREACHABLE),
        (DOCKER_DENIED, runtime_errors.IMAGE_PULL_FAILED),
        (ACA_PULL, runtime_errors.IMAGE_PULL_FAILED),
        (ACA_PULL_DNS, runtime_errors.REGISTRY_UNREACHABLE),
        (ACA_RATE_LIMIT, runtime_errors.REGISTRY_UNREACHABLE),
        ('ImagePullBackOff: Back-off pulling image "x"', runtime_errors.IMAGE_PULL_FAILED),
    ],
)
def test_a_pull_failure_is_told_from_an_unreachable_registry(text: str, kind: str) -> None:
    found = runtime_errors.image_pull(text)
    assert found is not None and found.kind == kind and found.gpu is False
    assert found.fix and found.evidence


def test_the_last_pull_line_decides_and_other_text_is_no_pull_failure() -> None:
    retried = f'level=warning msg="Failed, retrying in 1s ... (1/3). {PODMAN_REFUSED}"\n{PODMAN_SHORT_NAME}'
    found = runtime_errors.image_pull(retried)
    assert found is not None and found.kind == runtime_errors.IMAGE_PULL_FAILED
    assert runtime_errors.image_pull("Error: dial tcp 10.0.0.1:443: connection refused") is None
    assert runtime_errors.image_pull(ACA_CUDA) is None
    # a pull failure is no GPU finding: `acagpu local` and `doctor` keep their own wording for it
    assert runtime_errors.recognise(PODMAN_SHORT_NAME + "\n" + ACA_PULL) == []


def test_out_of_memory_and_exec_format_are_recognised_but_not_cuda_memory() -> None:
    assert [f.kind for f in runtime_errors.recognise(ACA_OOM)] == [runtime_errors.OUT_OF_MEMORY]
    oom_cgroup = "Memory cgroup out of memory: Killed process 4242 (python)"
    assert [f.kind for f in runtime_errors.recognise(oom_cgroup)] == [runtime_errors.OUT_OF_MEMORY]
    assert runtime_errors.recognise("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate") == []
    runc = "exec /usr/bin/python3: exec format error"
    (found,) = runtime_errors.recognise(runc)
    assert found.kind == runtime_errors.EXEC_FORMAT and "architecture" in found.summary
    assert "linux/amd64" in found.fix


def test_only_the_runtime_s_own_exec_line_means_the_program_never_ran() -> None:
    assert runtime_errors.exec_failed("exec /usr/bin/python3: exec format error")
    assert runtime_errors.exec_failed(
        "standard_init_linux.go:228: exec user process caused: exec format error"
    )
    assert not runtime_errors.exec_failed("OSError: [Errno 8] Exec format error: './tool'")
    assert not runtime_errors.exec_failed("sh: 1: ./tool: Exec format error")


def test_exit_137_reads_as_sigkill_and_other_codes_do_not() -> None:
    found = runtime_errors.killed(137)
    assert found is not None and "out-of-memory" in found.summary and "--memory" in found.fix
    assert runtime_errors.killed(1) is None and runtime_errors.killed(None) is None


def test_a_refusal_on_aca_names_the_platform_s_reason_or_the_pull_error() -> None:
    events = ['PullingImage: Pulling image "nvidia/cuda:13.0.1-base-ubuntu24.04"', ACA_CUDA,
              "BackoffLimitExceeded: Job has reached the specified backoff limit"]  # fmt: skip
    cuda = explain.refusal("nvidia/cuda:13.0.1-base-ubuntu24.04", events, reasons=True)
    assert cuda.error is None and cuda.reason.startswith(
        "ContainerCreateFailure: the image requires CUDA 13.0"
    )
    assert cuda.hint and "580.65.06" in cuda.hint

    pulled = explain.refusal("myacr.azurecr.io/train:9", [*events[:1], ACA_PULL, events[2]], reasons=True)
    assert pulled.error is not None and pulled.error.code == "ImagePullFailed"
    assert pulled.error.exit_code == EXIT_BAD_INPUT  # the image as named cannot be had: the input
    assert pulled.reason == (
        "cannot pull image myacr.azurecr.io/train:9: ImagePullFailure: failed to resolve reference "
        '"myacr.azurecr.io/train:9": myacr.azurecr.io/train:9: not found: manifest unknown'
    )  # the platform's reason and the registry's words, without the event's wrapping
    unreachable = explain.refusal("myacr.azurecr.io/train:9", [ACA_PULL_DNS], reasons=True)
    assert unreachable.error is not None and unreachable.error.exit_code == EXIT_INFRA

    unknown = explain.refusal("img", ["A: x", "B: y"], reasons=True, fallback="B: y")
    assert (unknown.reason, unknown.hint, unknown.error) == ("B: y", None, None)


def test_a_local_refusal_is_the_same_pull_rule_as_acagpu_local() -> None:
    short = explain.refusal("nosuchimage-acagpu-x", [PODMAN_SHORT_NAME])
    assert short.error is not None and short.error.exit_code == EXIT_BAD_INPUT
    assert short.reason.startswith('cannot pull image nosuchimage-acagpu-x: short-name "nosuchimage')
    refused = explain.refusal(
        "localhost:1/nosuch:tag", ["Trying to pull localhost:1/nosuch:tag...", PODMAN_REFUSED]
    )
    assert refused.error is not None and refused.error.exit_code == EXIT_INFRA


def test_exec_refusal_needs_the_runtime_s_line_first_and_no_stdout() -> None:
    line = "exec /app/train: exec format error"
    found = explain.exec_refusal(0, ["", line])
    assert found is not None and "exec format error" in found.reason
    assert explain.exec_refusal(1, [line]) is None  # the program ran: it printed
    assert explain.exec_refusal(0, ["starting", line]) is None
    assert explain.exec_refusal(0, []) is None


def test_a_crash_keeps_its_code_and_says_why_when_known() -> None:
    oom = explain.crash(137, ACA_OOM)
    assert oom is not None and "OOMKilled" in oom.reason
    bare = explain.crash(137)
    assert bare is not None and "SIGKILL" in bare.reason
    shell = explain.crash(126, "sh: 1: ./tool: Exec format error")
    assert shell is not None and "exec format error" in shell.reason
    assert explain.crash(1, "sh: 1: ./tool: Exec format error") is None  # a program's own words
    assert explain.crash(3) is None and explain.crash(0) is None


def _outcome(result: WorkloadResult) -> WorkloadOutcome:
    spec = make_run_spec(Settings(), RunRequest(image="img", runtime="podman", run_id="expl1"), owner="me")
    return WorkloadOutcome(
        plan=spec.plan, runtime="podman", spec=spec, result=result, teardown=NOTHING_CREATED
    )


def test_a_pull_refusal_exits_with_the_pull_error_s_code_not_5() -> None:
    why = explain.refusal("nosuchimage-acagpu-x", [PODMAN_SHORT_NAME])
    outcome = _outcome(WorkloadResult("refused", 125, why.reason, why.hint, error=why.error))
    assert (outcome.exit_code, outcome.status) == (EXIT_BAD_INPUT, "bad_input")
    error = outcome.failure()
    assert error is not None and error.code == "ImagePullFailed"
    doc = outcome.document()
    assert (doc["exit_code"], doc["exit_code_from"], doc["container"]["status"]) == (2, "acagpu", "refused")
    closing = render_run(doc)
    assert "cannot pull" not in closing  # the reason is said once, by the error line
    refused = _outcome(WorkloadResult("refused", 127, "no such program", "check the command"))
    assert (refused.exit_code, refused.status) == (EXIT_GPU_CHECK, "container_refused")


def test_a_crash_is_one_closing_line_with_its_reason_and_what_to_do() -> None:
    crash = explain.crash(137)
    assert crash is not None
    outcome = _outcome(WorkloadResult("exited", 137, crash.reason, crash.hint))
    assert (outcome.exit_code, outcome.status, outcome.failure()) == (137, "container_failed", None)
    doc = outcome.document()
    assert doc["container"]["hint"] == crash.hint
    (line,) = [x for x in render_run(doc).splitlines() if "container exited" in x]
    assert line == f"  container exited with code 137: {crash.reason}; {crash.hint}"


class _Events:
    """A cloud whose environment reports these system events (two jobs share it, as a warm one)."""

    def __init__(self, events: list[dict[str, str]]) -> None:
        self.events = events

    def system_events(self, resource_group: str, **where: object) -> list[dict[str, str]]:
        return self.events


def _workload(events: list[dict[str, str]]) -> Workload:
    runtime = Workload()
    runtime.cloud = _Events(events)  # type: ignore[assignment]
    runtime._lock, runtime._testers, runtime.result = threading.Lock(), [], None
    runtime.spec = make_run_spec(
        Settings(), RunRequest(image="myacr.azurecr.io/train:9", run_id="dl1"), owner="me"
    )
    runtime.console = Console(False, io.StringIO, io.StringIO)
    return runtime


def _event(job: str, reason: str, msg: str) -> dict[str, str]:
    return {"ContainerAppName": job, "Reason": reason, "Msg": msg}


def test_a_pull_that_fails_until_max_minutes_is_a_pull_error_not_a_timeout() -> None:
    """ACA may keep a replica in ImagePullBackOff until the replica timeout (DeadlineExceeded)."""
    reason, msg = ACA_PULL.split(": ", 1)
    other = _event(
        "run-other", "ContainerTerminated", msg.replace("not found: manifest unknown", "no such host")
    )
    runtime = _workload([_event("run-dl1", reason, msg), other])  # another run's event comes last
    plan = runtime.spec.plan
    where = Where("rg", "eastus", "/envs/e", "e", "gpu", {}, "rg")
    info = ExecutionInfo(
        "x1", "Failed", reason="DeadlineExceeded", message="Job was active longer than specified deadline"
    )
    run = TesterRun(execution="x1")
    result = runtime._judge(plan, where, "run-dl1", run, info)
    assert (result.status, result.seconds) == ("refused", 0.0) and run.never_ran
    assert result.error is not None and result.error.exit_code == EXIT_BAD_INPUT  # its own job's event
    assert "not found: manifest unknown" in (result.reason or "")

    printed = TesterRun(execution="x2", first_line=1.0)  # it ran and printed: a real timeout
    timed_out = runtime._judge(plan, where, "run-dl1", printed, info)
    assert timed_out.status == "timeout" and "--max-minutes" in (timed_out.reason or "")


def test_the_pull_fault_names_a_registry_text_the_pull_rule_knows() -> None:
    failed, unreachable = runtime_errors.IMAGE_PULL_FAILED, runtime_errors.REGISTRY_UNREACHABLE
    cases = [
        ("notfound", failed),
        ("denied", failed),
        ("unreachable", unreachable),
        ("ratelimit", unreachable),
    ]
    for error, kind in cases:
        (fault,), _ = faults.parse(f"pull:match=train,error={error}")
        text = faults.pull_error(fault, "myacr.azurecr.io/train:9")
        found = runtime_errors.image_pull(f"reason 'ImagePullFailure'. error: {text}")
        assert found is not None and found.kind == kind, error
    with pytest.raises(faults.FaultSpecError, match="unknown pull error"):
        faults.parse("pull:error=sometimes")


# podman 4.3 on a GPU host without containernetworking-plugins: the runtime, not the image, failed
PODMAN_NO_CNI = (
    'Error: plugin type="bridge" failed (add): failed to find plugin "bridge" in path '
    "[/usr/local/libexec/cni /usr/libexec/cni /usr/local/lib/cni /usr/lib/cni /opt/cni/bin]"
)


def test_a_runtime_that_cannot_set_up_the_network_is_infrastructure_not_the_image() -> None:
    found = runtime_errors.first(PODMAN_NO_CNI)
    assert found is not None and found.kind == runtime_errors.RUNTIME_NETWORK and not found.gpu
    warning = 'time="..." level=warning msg="plugin type=tuning failed (delete): failed to find plugin tuning'
    why = explain.refusal("localhost/img:1", [warning, PODMAN_NO_CNI])
    assert why.error is not None and why.error.exit_code == EXIT_INFRA and why.error.code == "RuntimeSetup"
    assert 'plugin type="bridge" failed (add)' in why.error.message  # the final error, not the warning
    assert why.hint and "containernetworking-plugins" in why.hint
    outcome = _outcome(WorkloadResult("refused", 126, why.reason, why.hint, error=why.error))
    assert outcome.exit_code == EXIT_INFRA and outcome.document()["exit_code_from"] == "acagpu"
    # a CUDA requirement stays the image's refusal (exit 5)
    cuda = explain.refusal(
        "img", ["nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.0"]
    )
    assert cuda.error is None
