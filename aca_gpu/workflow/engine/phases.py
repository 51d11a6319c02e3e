"""Where a pair's time went, in the platform's own words: its system events.

The kubelet says how long a pull took (`Successfully pulled image "X" in 20.5s (...)`) and newer ones
its size (`Image size: N bytes`); that, not a client's guess, is what `up` and `validate` report as
the image pull, with MB/s, so users see which images pull slowly where. Scheduling (AssigningReplica
→ PullingImage), container start (ImagePulled → ContainerStarted) and run (ContainerStarted → its
end: ContainerTerminated, or the job execution's Completed) come from the events' times.

`container_phases`, `phase_text` and `pull_text` read them back out of a result row of the JSON
document (its `platform` and the client's own `phases`), for `up`, `validate` and the matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from aca_gpu.naming import parse_iso_utc
from aca_gpu.units import duration_text
from aca_gpu.workflow.engine.replicas import event_owner
from aca_gpu.workflow.preflight.drivers import driver_of_event

PULLED = re.compile(
    r'Successfully pulled image "(?P<image>[^"]+)" in (?P<amount>[\d.]+)(?P<unit>ms|s)\b'
    r"(?:.*?Image size: (?P<size>\d+) bytes)?"
)


# the container's end: the kubelet's, or a job controller's word on its execution (a job's replica
# may say only that: `Job execution 'X' completed`)
ENDED = ("ContainerTerminated", "Completed", "BackoffLimitExceeded", "DeadlineExceeded")


def _field(event: dict[str, Any], *names: str) -> str:
    lowered = {str(k).lower(): v for k, v in event.items()}
    return next((str(lowered[n]) for n in names if lowered.get(n) not in (None, "")), "")


def _when(event: dict[str, Any]) -> datetime | None:
    text = _field(event, "timestamp", "time")
    return parse_iso_utc(text.replace(" +0000 UTC", "Z").replace(" ", "T")) if text else None


PRESENT = re.compile(r'Container image "(?P<image>[^"]+)" already present on machine')
# No full pull measured on ACA went faster than ~147 MB/s (2.94 GB in 20 s,
# microsoft/azure-container-apps#1763); an image "pulled"
# nearly three times faster than that was streamed (artifact streaming reads only what the container touches).
STREAMED_MB_S = 400.0


def registry_of(image: str) -> str:
    first = image.split("/", 1)[0].lower() if "/" in image else ""
    return first if ("." in first or ":" in first or first == "localhost") else "docker.io"


def pull_of(message: str) -> dict[str, Any] | None:
    """{image, seconds, bytes, mb_per_s, how, from} from an ImagePulled message (the kubelet's
    `Successfully pulled image ...`, or `... already present on machine`: cached), None for any
    other text. `how` is pulled, cached, or streamed (inferred from a rate no full pull reaches)."""
    present = PRESENT.search(message)
    if present is not None:
        image = present["image"]
        return {
            "image": image,
            "seconds": 0.0,
            "bytes": None,
            "mb_per_s": None,
            "how": "cached",
            "from": "node",
        }
    found = PULLED.search(message)
    if found is None:
        return None
    seconds = float(found["amount"]) / (1000.0 if found["unit"] == "ms" else 1.0)
    size = int(found["size"]) if found["size"] else None
    rate = round(size / 1e6 / seconds, 1) if size and seconds > 0 else None
    how = "streamed" if rate is not None and rate >= STREAMED_MB_S else "pulled"
    image = found["image"]
    return {
        "image": image,
        "seconds": round(seconds, 3),
        "bytes": size,
        "mb_per_s": rate,
        "how": how,
        "from": registry_of(image),
    }


def phases_of(events: Iterable[dict[str, Any]], owner: str) -> dict[str, Any]:
    """The phases of the last replica of `owner` (an app or job name) that the events describe."""
    mine = [e for e in events if event_owner(e) == owner]
    times: dict[str, datetime] = {}
    pull: dict[str, Any] | None = None
    driver: str | None = None
    for event in mine:
        reason, when = _field(event, "reason"), _when(event)
        if reason == "ImagePulled":
            pull = pull_of(_field(event, "msg", "message")) or pull
        if reason == "GpuDriverInfo":  # the host's driver, said before the container starts
            driver = driver_of_event(_field(event, "msg", "message")) or driver
        if when is not None and reason == "ContainerTerminated":
            times["terminated"] = when
        elif when is not None and reason in ENDED:  # the execution's: after the replica's linger
            times["finished"] = when
        elif when is not None and reason in (
            "AssigningReplica",
            "PullingImage",
            "ImagePulled",
            "ContainerStarted",
        ):
            times[reason] = when
    # the container's own end where the kubelet said it (the execution's Completed comes only once
    # its ended replica has gone, seconds later), else the execution's end after the last start
    started = times.get("ContainerStarted")
    terminated = times.get("terminated")
    if terminated is not None and (started is None or terminated >= started):
        times["ended"] = terminated
    elif "finished" in times:
        times["ended"] = times["finished"]
    doc: dict[str, Any] = {}
    if pull is not None:
        doc["image_pull"] = pull
    if mine:  # said only where the platform said anything about this replica
        doc["gpu_driver"] = {
            "driver": driver,
            "source": "GpuDriverInfo event" if driver else "no GpuDriverInfo event",
        }
    for name, start, end in (
        ("scheduling_s", "AssigningReplica", "PullingImage"),
        ("container_start_s", "ImagePulled", "ContainerStarted"),
        ("run_s", "ContainerStarted", "ended"),
    ):
        if start in times and end in times and times[end] >= times[start]:
            doc[name] = round((times[end] - times[start]).total_seconds(), 3)
    return doc


def container_times(
    events: Iterable[dict[str, Any]], job: str, executions: Iterable[str]
) -> dict[str, tuple[float, float]]:
    """execution -> (ContainerStarted, ContainerTerminated) of its replica, epoch seconds as the
    events stamp them (whole seconds on Azure), for the executions of `job` whose events say both.
    A job replica is named after its execution (`{execution}-xxxxx`; the emulator also names the
    execution as the event's revision): that, not the job, tells one shard's events from another's.
    The first start and the last end: a replica bills from its first container start to its end."""
    wanted = {name.lower(): name for name in executions}
    found: dict[str, dict[str, float]] = {}
    for event in events:
        if event_owner(event).lower() != job.lower():
            continue
        reason, when = _field(event, "reason"), _when(event)
        if when is None or reason not in ("ContainerStarted", "ContainerTerminated"):
            continue
        replica, revision = _field(event, "replicaname").lower(), _field(event, "revisionname").lower()
        execution = wanted.get(revision) or wanted.get(replica.rsplit("-", 1)[0] if "-" in replica else "")
        if execution is None:
            continue
        seen = found.setdefault(execution, {})
        if reason == "ContainerStarted":
            seen.setdefault("started", when.timestamp())
        else:
            seen["ended"] = when.timestamp()
    return {
        name: (seen["started"], seen["ended"])
        for name, seen in found.items()
        if "started" in seen and "ended" in seen and seen["ended"] >= seen["started"]
    }


# ---- reading them back (rendering) --------------------------------------------------------------

# (container, the client's own figures in a pair's `phases`: its run, ready-after and pull)
_MEASURED = (
    ("probe", "nvidia-smi", "probe start", "probe image pull"),
    ("tester", "test run", "tester start", "tester image pull"),
)


def container_phases(row: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per container of one result row (`probe`, `tester`): scheduling_s, pull_s, pull_bytes,
    pull_mb_per_s, start_s, run_s from the platform's events, else what the client measured (run,
    pull), and ready_s (from the start request to a running container, as the client saw it)."""
    platform = row.get("platform") or {}
    measured = row.get("phases") or {}
    found: dict[str, dict[str, Any]] = {}
    for name, run_key, ready_key, pull_key in _MEASURED:
        own = platform.get(name) or {}
        pull = own.get("image_pull") or {}
        doc = {
            "scheduling_s": own.get("scheduling_s"),
            "pull_s": pull.get("seconds", measured.get(pull_key)),
            "pull_bytes": pull.get("bytes"),
            "pull_mb_per_s": pull.get("mb_per_s"),
            "start_s": own.get("container_start_s"),
            "run_s": own.get("run_s", measured.get(run_key)),
            "ready_s": measured.get(ready_key),
        }
        doc = {k: v for k, v in doc.items() if isinstance(v, int | float)}
        for key, value in (("pull_how", pull.get("how")), ("pull_from", pull.get("from"))):
            if isinstance(value, str) and value:
                doc[key] = value
        if doc:
            found[name] = doc
    return found


# which clock a printed figure is on: the platform's own account (events, the kubelet's words; an
# emulator's scaled clock) or this client's (wall) clock; the JSON says it per phase (`phase_clocks`)
PLATFORM_MARK = "(platform clock)"
WALL_MARK = "(wall clock)"


def fmt_s(seconds: float) -> str:
    """The one duration text (units.duration_text)."""
    return duration_text(seconds)


def fmt_bytes(size: float) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def _pull_detail(phases: Mapping[str, Any]) -> str:
    parts = []
    if phases.get("pull_bytes"):
        parts.append(fmt_bytes(float(phases["pull_bytes"])))
    if phases.get("pull_mb_per_s"):
        parts.append(f"{float(phases['pull_mb_per_s']):g} MB/s")
    text = f" ({', '.join(parts)})" if parts else ""
    how, source = phases.get("pull_how"), phases.get("pull_from")
    if how == "cached":
        return text + " cached on the node"
    if source:
        text += f" {'streamed' if how == 'streamed' else 'pulled'} from {source}"
    return text


def phase_text(phases: Mapping[str, Any]) -> str:
    """One container's phases on one line: `scheduling 4.0s, pull 72s (1.6 GB, 22.4 MB/s), start
    2.0s, run 0.2s; ready after 80s`."""
    parts = []
    if "scheduling_s" in phases:
        parts.append(f"scheduling {fmt_s(phases['scheduling_s'])}")
    if "pull_s" in phases:
        parts.append(f"pull {fmt_s(phases['pull_s'])}{_pull_detail(phases)}")
    if "start_s" in phases:
        parts.append(f"start {fmt_s(phases['start_s'])}")
    if "run_s" in phases:
        parts.append(f"run {fmt_s(phases['run_s'])}")
    text = ", ".join(parts) + (f" {PLATFORM_MARK}" if parts else "")
    if "ready_s" in phases:
        text += ("; " if text else "") + f"ready after {fmt_s(phases['ready_s'])} {WALL_MARK}"
    return text


def arrival_text(pull: Mapping[str, Any] | None, asked: str | None = None) -> str:
    """How one container's image arrived, from the platform's own pull event (`container.platform
    .image_pull` of a run's document): `pulled from docker.io in 42s (platform clock)`, `cached on
    the node`, `streamed from REGISTRY ...`; a staged copy is named. Said also when nothing said it."""
    if not pull:
        return "not reported (the platform's pull event was not read)"
    image = str(pull.get("image") or "")
    staged = f"; the environment's staged copy {image}" if asked and image and image != asked else ""
    if pull.get("how") == "cached":
        return f"cached on the node (no pull){staged}"
    verb = "streamed" if pull.get("how") == "streamed" else "pulled"
    source = f" from {pull['from']}" if pull.get("from") else ""
    took = f" in {fmt_s(float(pull['seconds']))} {PLATFORM_MARK}" if pull.get("seconds") is not None else ""
    detail = _pull_detail({"pull_bytes": pull.get("bytes"), "pull_mb_per_s": pull.get("mb_per_s")})
    return f"{verb}{source}{took}{detail}{staged}"


def pull_text(row: Mapping[str, Any]) -> str | None:
    """The pull of the image under test (the probe's), for a matrix cell: `pull 72s (1.6 GB, 22.4
    MB/s) in eastus`; None when nobody said how long it took."""
    probe = container_phases(row).get("probe") or {}
    if "pull_s" not in probe:
        return None
    where = f" in {row['location']}" if row.get("location") else ""
    return f"pull {fmt_s(probe['pull_s'])}{_pull_detail(probe)}{where}"
