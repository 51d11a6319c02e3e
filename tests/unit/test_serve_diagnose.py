"""Why a served app has not answered, judged from its replicas and system events in the shape the
event stream has them (`TimeStamp`, `ContainerAppName`, `Reason`, `Msg`, as the recorded stream)."""

from __future__ import annotations

from typing import Any

from aca_gpu.azure.served import startup_probe
from aca_gpu.models import ReplicaInfo
from aca_gpu.workflow.serve.diagnose import after_timeout, decisive, probe_text
from aca_gpu.workflow.serve.waiting import standing
from aca_gpu.workflow.spend.served import event_time

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


def test_a_startup_probe_that_failed_its_last_look_ends_the_wait_naming_the_probe() -> None:
    """The platform's words (microsoft/azure-container-apps#1561): a ReplicaUnhealthy event per failed
    look, then StoppingContainer; the probe as serve set it is named, exit 4 (not 5: a probe that
    never passes does not say the image or GPU failed)."""
    probe = probe_text(startup_probe("/health", 8000, 1800), 1800)
    assert probe.startswith("GET /health on port 8000, 10 look(s) 194 s apart from 60 s")
    looking = [*PLACED, event("ContainerStarted", "Started"),
               event("ReplicaUnhealthy", "startup probe failed: connection refused")]  # fmt: skip
    assert decisive(APP, [], looking, probe) is None  # a failed look is no verdict: the load goes on
    stopped = [*looking, event("StoppingContainer", "Container main failed startup probe, will be restarted")]
    found = decisive(APP, [], stopped, probe)
    assert found is not None and found.exit_code == 4 and found.code == "ProbeFailed"
    assert probe in found.message and '"startup probe failed: connection refused"' in found.message


def test_the_startup_probe_gives_the_model_its_whole_load_timeout() -> None:
    """The prober looks first after initialDelaySeconds, then every periodSeconds, and restarts the
    container at the failureThreshold-th failed look: that last look falls at the load timeout, or
    just after it, within ACA's limits (delay <= 60, period <= 240, threshold <= 10)."""
    for load in (1, 2, 9, 10, 11, 100, 599, 600, 1800, 2220):
        p = startup_probe("/", 80, load)
        last = p["initialDelaySeconds"] + (p["failureThreshold"] - 1) * p["periodSeconds"]
        assert load <= last <= load + p["periodSeconds"], (load, p)
        assert 1 <= p["initialDelaySeconds"] <= 60 and 1 <= p["periodSeconds"] <= 240, p
        assert 1 <= p["failureThreshold"] <= 10, p


def test_while_it_waits_serve_says_where_the_start_stands_in_the_platforms_words() -> None:
    assigning = ReplicaInfo(f"{APP}--r1-abc", "NotRunning", details="AssigningReplica")
    placing = [event("AssigningReplica", "Replica 'r1' has been scheduled to run on a node.")]
    found = standing(APP, [assigning], placing, None)
    assert found.text.startswith(f"not placed yet: replica {APP}--r1-abc waits for a node (AssigningReplica")
    pulling = ReplicaInfo(f"{APP}--r1-abc", "NotRunning", details="PullingImage")
    found = standing(APP, [pulling], PLACED, None, now=event_time(PLACED[-1]) + 40)  # type: ignore[operator]
    assert (
        found.text == 'pulling the image for 40s, not ended yet (Pulling image "m:1")' and not found.unplaced
    )
    # the revision counts a replica the platform does not list: no node took it, said as such
    found = standing(APP, [], [], 1)
    assert found.unplaced and "the revision counts 1 replica(s) and the platform lists none" in found.text
    assert not standing(APP, [], [], 0).unplaced  # at zero: the platform is asked for one
    started = [*PLACED, event("ImagePulled", "pulled"), event("ContainerStarted", "Started"),
               event("ReplicaUnhealthy", "startup probe failed: connection refused")]  # fmt: skip
    running = ReplicaInfo(f"{APP}--r1-abc", "Running")
    assert "startup probe failed 1 look(s) so far" in standing(APP, [running], started, None).text
