"""Phases from system events (the recorded kubelet message, the newer one with a size, and times),
and how `up`, `validate` and the matrix print them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aca_gpu.workflow.engine.phases import (
    container_phases,
    container_times,
    phase_text,
    phases_of,
    pull_of,
    pull_text,
)
from aca_gpu.workflow.tester import report
from aca_gpu.workflow.tester.render import render_up, render_up_markdown, render_validate

RECORDING = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "arm-recordings"
    / "test_containerapp_eventstream.jsonl"
)


def _recorded_events() -> list[dict[str, object]]:
    for line in RECORDING.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        if doc.get("response_body_ndjson") and "containerApps" in doc["uri"]:
            return list(doc["response_body_ndjson"])
    raise AssertionError("no app event stream in the recording")


def test_the_recorded_pull_message_reads_in_milliseconds() -> None:
    phases = phases_of(_recorded_events(), "capp000002")
    assert phases["image_pull"] == {
        "image": "mcr.microsoft.com/k8se/quickstart:latest",
        "seconds": 0.826,
        "bytes": None,  # that kubelet did not say the size
        "mb_per_s": None,
        "how": "pulled",
        "from": "mcr.microsoft.com",
    }
    assert phases["container_start_s"] == 0.0  # pulled and started within the same second


def test_a_size_gives_the_rate_and_other_owners_do_not_count() -> None:
    message = (
        'Successfully pulled image "r.azurecr.io/t:1" in 20s (20s including waiting). '
        "Image size: 2940000000 bytes."
    )
    assert pull_of(message) == {
        "image": "r.azurecr.io/t:1",
        "seconds": 20.0,
        "bytes": 2940000000,
        "mb_per_s": 147.0,
        "how": "pulled",
        "from": "r.azurecr.io",
    }
    events = [
        {
            "TimeStamp": "2026-11-24T10:00:00Z",
            "ContainerAppName": "job-a",
            "Reason": "AssigningReplica",
            "Msg": "",
        },
        {
            "TimeStamp": "2026-11-24T10:00:04Z",
            "ContainerAppName": "job-a",
            "Reason": "PullingImage",
            "Msg": "",
        },
        {
            "TimeStamp": "2026-11-24T10:00:24Z",
            "ContainerAppName": "job-a",
            "Reason": "ImagePulled",
            "Msg": message,
        },
        {
            "TimeStamp": "2026-11-24T10:00:26Z",
            "ContainerAppName": "job-a",
            "Reason": "ContainerStarted",
            "Msg": "",
        },
        {
            "TimeStamp": "2026-11-24T10:00:30Z",
            "ContainerAppName": "job-b",
            "Reason": "PullingImage",
            "Msg": "",
        },
        {
            "TimeStamp": "2026-11-24T10:00:33.5Z",
            "JobName": "job-a",
            "Reason": "ContainerTerminated",
            "Msg": "Container 'tester' was terminated with exit code '0'",
        },
    ]
    phases = phases_of(events, "job-a")
    assert phases["scheduling_s"] == 4.0 and phases["container_start_s"] == 2.0
    assert phases["run_s"] == 7.5  # ContainerStarted → ContainerTerminated
    assert phases["image_pull"]["mb_per_s"] == 147.0
    assert phases_of(events, "job-c") == {}
    assert pull_of('Pulling image "x"') is None


def test_a_replica_that_restarted_and_runs_again_has_no_run_yet() -> None:
    events = [
        {"TimeStamp": "2026-11-24T10:00:00Z", "JobName": "j", "Reason": "ContainerStarted"},
        {"TimeStamp": "2026-11-24T10:00:05Z", "JobName": "j", "Reason": "ContainerTerminated"},
        {"TimeStamp": "2026-11-24T10:00:09Z", "JobName": "j", "Reason": "ContainerStarted"},
    ]
    assert "run_s" not in phases_of(events, "j")
    done = {"TimeStamp": "2026-11-24 10:01:09 +0000 UTC", "JobName": "j", "Reason": "Completed"}
    assert phases_of([*events, done], "j")["run_s"] == 60.0  # a job's execution ends its run


def test_a_run_ends_at_its_containers_exit_not_its_executions_completed_after_the_linger() -> None:
    """The execution is Completed only once its ended replica has gone (5 s later in the emulator's
    aca-2026 durations): that is no part of what the container billed."""
    events = [
        {"TimeStamp": "2026-11-24 10:00:00 +0000 UTC", "JobName": "j", "Reason": "ContainerStarted"},
        {"TimeStamp": "2026-11-24 10:00:05 +0000 UTC", "JobName": "j", "Reason": "ContainerTerminated"},
        {"TimeStamp": "2026-11-24 10:00:10 +0000 UTC", "JobName": "j", "Reason": "Completed"},
    ]
    assert phases_of(events, "j")["run_s"] == 5.0


def test_each_shards_container_times_come_from_its_own_replicas_events() -> None:
    """Shards are executions of one job: a replica is named after its execution (`{execution}-xxxxx`
    on Azure; the emulator also names the execution as the event's revision)."""

    def event(
        second: int, reason: str, replica: str, job: str = "run-f", revision: str = ""
    ) -> dict[str, Any]:
        return {"TimeStamp": f"2026-11-24 10:00:{second:02d} +0000 UTC", "ContainerAppName": job,
                "RevisionName": revision, "ReplicaName": replica, "Reason": reason}  # fmt: skip

    events = [
        event(1, "ContainerStarted", "run-f-aaaaaaa-x1y2z"),
        event(2, "ContainerStarted", "", revision="run-f-bbbbbbb"),
        event(3, "ContainerTerminated", "run-f-aaaaaaa-x1y2z"),
        event(3, "ContainerStarted", "run-f-ccccccc-q1w2e"),  # never ended: no figure
        event(4, "ContainerStarted", "run-g-aaaaaaa-x1y2z", job="run-g"),  # another job's
        event(9, "ContainerTerminated", "run-f-bbbbbbb-m3n4o"),
        event(11, "Completed", "", revision="run-f-aaaaaaa"),  # the execution's, after the linger
    ]
    base = datetime(2026, 11, 24, 10, 0, tzinfo=UTC).timestamp()
    found = container_times(events, "run-f", ["run-f-aaaaaaa", "run-f-bbbbbbb", "run-f-ccccccc"])
    assert found == {"run-f-aaaaaaa": (base + 1, base + 3), "run-f-bbbbbbb": (base + 2, base + 9)}


# ---- rendering -----------------------------------------------------------------------------------

PULL = {"image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "seconds": 71.565, "bytes": 1600000000}
WARM_ROW: dict[str, Any] = {
    "image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
    "gpu": "t4",
    "status": "pass",
    "driver_version": "550.144.03",
    "cuda_version": "12.4",
    "gpu_lines": [],
    "phases": {"probe start": 80.2, "nvidia-smi": 1.2, "probe image pull": 71.565, "test run": 58.0},
    "platform": {
        "probe": {
            "image_pull": {**PULL, "mb_per_s": 22.4},
            "scheduling_s": 4.0,
            "container_start_s": 2.0,
            "run_s": 3.0,
        },
        "tester": {
            "image_pull": {"image": "t", "seconds": 158.5, "bytes": None, "mb_per_s": None},
            "scheduling_s": 4.5,
        },
    },
}
COLD_ROW: dict[str, Any] = {  # no system events read: the client's own figures only
    "image": "nvidia/cuda:12.2.2-runtime-ubuntu22.04",
    "gpu": "t4",
    "status": "pass",
    "phases": {"probe start": 95.0, "nvidia-smi": 2.0, "tester start": 30.0, "test run": 61.0},
}


def test_each_container_gets_the_platforms_phases_else_the_clients() -> None:
    assert container_phases(WARM_ROW) == {
        "probe": {
            "scheduling_s": 4.0,
            "pull_s": 71.565,
            "pull_bytes": 1600000000,
            "pull_mb_per_s": 22.4,
            "start_s": 2.0,
            "run_s": 3.0,  # the platform's, not the client's nvidia-smi 1.2
            "ready_s": 80.2,
        },
        "tester": {"scheduling_s": 4.5, "pull_s": 158.5, "run_s": 58.0},
    }
    assert container_phases(COLD_ROW) == {
        "probe": {"run_s": 2.0, "ready_s": 95.0},
        "tester": {"run_s": 61.0, "ready_s": 30.0},
    }
    assert container_phases({"image": "x", "gpu": "t4", "status": "error"}) == {}


def test_one_line_per_container() -> None:
    probe, tester = (phase_text(p) for p in container_phases(WARM_ROW).values())
    assert (
        probe == "scheduling 4.0s, pull 72s (1.6 GB, 22.4 MB/s), start 2.0s, run 3.0s (platform clock); "
        "ready after 80s (wall clock)"
    )
    assert tester == "scheduling 4.5s, pull 2m38s, run 58s (platform clock)"
    assert phase_text({"pull_s": 900.0, "pull_bytes": 250e6}) == "pull 15m00s (250 MB) (platform clock)"
    assert pull_text(WARM_ROW) == "pull 72s (1.6 GB, 22.4 MB/s)"
    assert (
        pull_text({**WARM_ROW, "location": "swedencentral"})
        == "pull 72s (1.6 GB, 22.4 MB/s) in swedencentral"
    )
    assert pull_text(COLD_ROW) is None  # nobody said how long the image took


def _up_doc(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "command": "up",
        "run_id": "warma",
        "status": "ok",
        "location": "eastus",
        "profile": {"type": "Consumption-GPU-NC8as-T4"},
        "resources": {"resource_group": "rg-acagpu-warma", "probe_job": "cuda-probe-warma"},
        "explorer": {"image": row["image"], "gpus": [{"name": "Tesla T4"}], "driver_version": "550.144.03"},
        "tester": {"image": "t", "status": "pass", "result": {"status": "pass"}},
        "results": [row],
        "phases": {"preflight": 0.4, "probe and test": 140.0, "teardown": 2.0, **row["phases"]},
        "cost": {"gpu_seconds": 61.0, "usd_estimate": 0.0045, "basis": "measured"},
        "teardown": {"status": "deleting", "billing_stopped": True},
    }


def test_up_prints_each_containers_phases_under_the_runs() -> None:
    lines = render_up(_up_doc(WARM_ROW)).splitlines()
    assert "  phases         preflight 0.4s, probe and test 2m20s, teardown 2.0s (wall clock)" in lines
    assert (
        "  probe          scheduling 4.0s, pull 72s (1.6 GB, 22.4 MB/s), start 2.0s, run 3.0s "
        "(platform clock); ready after 80s (wall clock)" in lines
    )
    assert "  tester         scheduling 4.5s, pull 2m38s, run 58s (platform clock)" in lines
    cold = render_up(_up_doc(COLD_ROW)).splitlines()
    assert "  probe          run 2.0s (platform clock); ready after 95s (wall clock)" in cold
    markdown = render_up_markdown(_up_doc(WARM_ROW))
    assert "| probe phases | scheduling 4.0s, pull 72s (1.6 GB, 22.4 MB/s), start 2.0s" in markdown


def test_validate_prints_every_pairs_phases() -> None:
    doc = {
        "results": [WARM_ROW, COLD_ROW],
        "teardown": {"status": "deleted", "verified": True},
        "phases": {"preflight": 0.4, "2 pairs": 90.0, "teardown": 2.0},
    }
    lines = render_validate(doc).splitlines()
    at = lines.index("nvidia/cuda:12.4.1-runtime-ubuntu22.04 on t4:")
    assert (
        lines[at + 1]
        == "  probe    scheduling 4.0s, pull 72s (1.6 GB, 22.4 MB/s), start 2.0s, run 3.0s (platform clock); "
        "ready after 80s (wall clock)"
    )
    assert lines[at + 2] == "  tester   scheduling 4.5s, pull 2m38s, run 58s (platform clock)"
    at = lines.index("nvidia/cuda:12.2.2-runtime-ubuntu22.04 on t4:")
    assert lines[at + 1 : at + 3] == [
        "  probe    run 2.0s (platform clock); ready after 95s (wall clock)",
        "  tester   run 61s (platform clock); ready after 30s (wall clock)",
    ]
    assert lines[-1] == "phases: preflight 0.4s, 2 pairs 90s, teardown 2.0s (wall clock)"
    one = render_validate({**doc, "results": [WARM_ROW], "phases": {"total": 9.0, **WARM_ROW["phases"]}})
    assert (
        one.splitlines()[-1] == "phases: total 9.0s (wall clock)"
    )  # the pair's own figures are on its lines


def test_the_matrix_shows_where_each_image_pulled_slowly(tmp_path: Path) -> None:
    doc = {"command": "validate", "location": "swedencentral", "results": [WARM_ROW, COLD_ROW]}
    path = tmp_path / "validate.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    matrix = report.merge_files([path])
    assert {p["location"] for p in matrix.pairs} == {"swedencentral"}  # the run's region, per row
    markdown = report.render_markdown(matrix)
    warm = next(line for line in markdown.splitlines() if "12.4.1" in line)
    assert warm.endswith("<br>health not read<br>pull 72s (1.6 GB, 22.4 MB/s) in swedencentral |")
    cold = next(line for line in markdown.splitlines() if "12.2.2" in line)
    assert "pull" not in cold  # no figure is better than a guessed one
    kept = report.pairs_from_document({**doc, "results": [{**WARM_ROW, "location": "eastus"}]})
    assert kept[0]["location"] == "eastus"  # a row that says where it ran keeps it


def test_a_pull_says_how_the_image_arrived_and_the_driver_event_is_read() -> None:
    """Cached (the kubelet's `already present`), streamed (a rate no full pull reaches) or pulled
    from its registry; the GpuDriverInfo event names the host's driver, and its absence is said."""
    cached = pull_of('Container image "nvidia/cuda:12.4.1-base-ubuntu22.04" already present on machine')
    assert cached is not None and cached["how"] == "cached" and cached["from"] == "node"
    streamed = pull_of(
        'Successfully pulled image "a.azurecr.io/p/t:1" in 2.5s (2.5s including waiting). '
        "Image size: 3300000000 bytes."
    )
    assert streamed is not None and streamed["how"] == "streamed" and streamed["from"] == "a.azurecr.io"
    text = phase_text({"pull_s": 2.5, "pull_bytes": 3.3e9, "pull_mb_per_s": 1320.0, "pull_how": "pulled",
                       "pull_from": "a.azurecr.io"})  # fmt: skip
    assert "(3.3 GB, 1320 MB/s) pulled from a.azurecr.io" in text, text
    base = {"TimeStamp": "2026-11-24T10:00:00Z", "JobName": "j", "Msg": ""}
    said = phases_of([{**base, "Reason": "GpuDriverInfo", "Msg": "pod started, CUDA driver 580.159.04"}], "j")
    assert said["gpu_driver"] == {"driver": "580.159.04", "source": "GpuDriverInfo event"}
    silent = phases_of([{**base, "Reason": "AssigningReplica"}], "j")
    assert silent["gpu_driver"] == {"driver": None, "source": "no GpuDriverInfo event"}


def test_the_probes_phases_are_never_negative_when_its_stream_saw_the_end_first() -> None:
    """Issue 36 item 8: `up -o json` gave a negative `phases."nvidia-smi"` in 3 of 6 runs: the
    follower saw the short probe end (10 s) before the look that waits for its start returned
    (12 s), and nvidia-smi's phase was taken from that look to the end."""
    from aca_gpu.workflow.engine.executions import ExecutionRun
    from aca_gpu.workflow.engine.probe_job import probe_phases

    unseen = ExecutionRun("e1", started=5.0, ended=10.0)
    assert probe_phases(unseen, requested=5.0, looked=12.0) == (5.0, 0.0)  # started by the end at most
    streamed = ExecutionRun("e2", started=5.0, running=8.5, ended=10.0)
    assert probe_phases(streamed, requested=5.0, looked=12.0) == (3.5, 1.5)  # the stream saw it start
