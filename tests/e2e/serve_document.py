"""A `serve --measure 3 -o json` document for the report's page tests, built by the measurement's own
functions (`cycle_phases`, `phase_stats`, `remedies`) from system events in the event stream's
format: the real command takes a cooldown per cycle, and no cheap run has its ingress cut a request
off, which the page must show. Cycle 3 is such a cycle: a 504 at 240 s, then the answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aca_gpu.workflow.serve.http import Answer
from aca_gpu.workflow.serve.measure import INGRESS_TIMEOUT_S, Target, remedies
from aca_gpu.workflow.serve.phases import cycle_phases, phase_stats

APP = "serve-sv1"
IMAGE = "vllm/vllm-openai:v0.8.5"
# (pull s, load s) per cycle: a full pull, a cached one, and one slow enough to be cut off
CYCLES = ((48.0, 21.0), (0.0, 19.5), (210.0, 24.0))


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def _event(reason: str, t: float, msg: str = "") -> dict[str, Any]:
    return {"ContainerAppName": APP, "Reason": reason, "TimeStamp": _stamp(t), "Msg": msg}


def _cycle(number: int, sent: float, pull_s: float, load_s: float) -> dict[str, Any]:
    assign, pulling = sent + 3.0, sent + 11.0
    pulled, started = pulling + pull_s, pulling + pull_s + 4.0
    msg = (
        f'Container image "{IMAGE}" already present on machine'
        if pull_s == 0
        else f'Successfully pulled image "{IMAGE}" in {pull_s}s. Image size: 9123456789 bytes.'
    )
    events = [
        _event("AssigningReplica", assign), _event("PullingImage", pulling),
        _event("ImagePulled", pulled, msg), _event("ContainerStarted", started),
    ]  # fmt: skip
    first_byte, end = started + load_s, started + load_s + 0.4
    answers = []
    if end - sent > INGRESS_TIMEOUT_S:
        answers.append(Answer(504, sent, INGRESS_TIMEOUT_S, INGRESS_TIMEOUT_S, 24))
    last_sent = sent + (INGRESS_TIMEOUT_S + 0.5 if answers else 0.0)
    answers.append(Answer(200, last_sent, first_byte - last_sent, end - last_sent, 512))
    cycle = cycle_phases(events, APP, sent=sent, first_byte=first_byte, end=end)
    cut = any(a.status == 504 for a in answers)
    cycle.update(
        cycle=number, status=200, attempts=[a.as_dict() for a in answers],
        cut_off=cut or cycle["end_to_end_s"] > INGRESS_TIMEOUT_S,
    )  # fmt: skip
    return cycle


def serve_document() -> dict[str, Any]:
    origin = 1_795_000_000.0
    cycles = [_cycle(n, origin + n * 1000.0, pull, load) for n, (pull, load) in enumerate(CYCLES, 1)]
    target = Target("acagpu-sv1", APP, "https://serve-sv1.example.azurecontainerapps.io", "/health",
                    300, 1800.0, 1.56, "westeurope")  # fmt: skip
    flagged = [c["cycle"] for c in cycles if c["cut_off"]]
    measurement = {
        "cycles": cycles,
        "phase_percentiles": phase_stats(cycles),
        "warm": {
            "requests": 50, "concurrency": 4, "ok": 50, "failed": 0,
            "total_s": {"p50": 0.212, "p95": 0.388, "p99": 0.51},
            "first_byte_s": {"p50": 0.181, "p95": 0.342, "p99": 0.47},
        },
        "ingress_timeout_s": INGRESS_TIMEOUT_S,
        "flagged_cycles": flagged,
        "remedies": remedies(target) if flagged else [],
    }  # fmt: skip
    return {
        "schema": 1, "command": "serve", "status": "measured", "run_id": "sv1", "app": APP,
        "url": target.url, "price": {"usd_per_hour": 1.56, "basis": "T4 list price",
                                     "while": "a replica runs; at zero replicas nothing bills"},
        "first_answer": {"status": 200, "seconds": 93.1}, "measurement": measurement,
        "kept": True, "delete": "acagpu down --run-id sv1 --yes", "error": None, "exit_code": 0,
    }  # fmt: skip
