"""Why a served app has not answered, judged from its replicas and system events in the shape the
event stream has them (`TimeStamp`, `ContainerAppName`, `Reason`, `Msg`, as the recorded stream)."""

from __future__ import annotations

from typing import Any

from aca_gpu.models import ReplicaInfo
from aca_gpu.workflow.serve.diagnose import after_timeout, decisive

APP = "serve-x1"


def event(reason: str, msg: str, app: str = APP) -> dict[str, Any]:
    return {"TimeStamp": "2026-11-29T01:00:00Z", "Type": "Normal", "ContainerAppName": app,
            "ReplicaName": f"{app}--r1-abc", "Reason": reason, "Msg": msg}  # fmt: skip


PLACED = [event("AssigningReplica", "Replica 'r1' has been scheduled to run on a node."),
          event("PullingImage", 'Pulling image "m:1"')]  # fmt: skip


def test_a_replica_on_a_full_profile_is_capacity_at_once() -> None:
    full = ReplicaInfo(f"{APP}--r1-abc", "NotRunning", details="WorkLoad Profile Full")
    found = decisive(APP, [full], [])
    assert found is not None and found.exit_code == 3 and found.code == "CapacityUnavailable"


def test_a_container_killed_for_memory_is_exit_5_in_the_platforms_words() -> None:
    killed = event(
        "ContainerTerminated", "Container 'main' was terminated with exit code '137' and reason 'OOMKilled'"
    )
    found = decisive(APP, [], [*PLACED, killed])
    assert found is not None and found.exit_code == 5 and "OOMKilled" in found.message
    assert decisive(APP, [], [*PLACED, event("ContainerTerminated", "... 'OOMKilled'", app="other")]) is None


def test_a_wait_that_ran_out_says_which_phase_it_stopped_in() -> None:
    stalled = after_timeout(APP, "/health", PLACED, "20m")
    assert stalled.exit_code == 4 and stalled.code == "PullStalled" and "Pulling image" in stalled.message
    probe = [*PLACED, event("ImagePulled", "pulled"), event("ContainerStarted", "Started"),
             event("ProbeFailed", "Probe of StartUp failed with status code: 404")]  # fmt: skip
    assert after_timeout(APP, "/health", probe, "20m").code == "ProbeFailed"
    assert after_timeout(APP, "/health", [], "20m").code == "ReplicaNotPlaced"
    slow = [*PLACED, event("ImagePulled", "pulled"), event("ContainerStarted", "Started")]
    assert after_timeout(APP, "/health", slow, "20m").code == "NoAnswer"
