"""Phases from system events: the recorded kubelet message, the newer one with a size, and times."""

from __future__ import annotations

import json
from pathlib import Path

from aca_gpu.workflow.phases import phases_of, pull_of

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
    ]
    phases = phases_of(events, "job-a")
    assert phases["scheduling_s"] == 4.0 and phases["container_start_s"] == 2.0
    assert phases["image_pull"]["mb_per_s"] == 147.0
    assert phases_of(events, "job-c") == {}
    assert pull_of('Pulling image "x"') is None
