"""What the user's container did, and the one exit-code rule of `acagpu run` (like `docker run`).

The container's stdout and stderr reach the terminal line by line as they arrive (`Console`); with
`-o json` they are collected into the document instead, capped, with a note when capped. acagpu
exits with the container's code when the container ran; its own failures before or around it keep
their documented codes, and the document's `exit_code_from` says which of the two it was.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from aca_gpu.errors import EXIT_INTERRUPTED, AcaGpuError, GpuCheckFailed
from aca_gpu.units import gpu_seconds_text, usd_text
from aca_gpu.workflow.engine import lifetime
from aca_gpu.workflow.engine.lifetime import quality_text
from aca_gpu.workflow.engine.outcome import RunOutcome
from aca_gpu.workflow.engine.phases import arrival_text
from aca_gpu.workflow.workload.plan import RunSpec, replica_price

MAX_LINES = 5000  # per stream, in the JSON document
MAX_CHARS = 1_000_000
STATUS_BY_EXIT = {
    0: "ok",
    1: "failed",
    2: "bad_input",
    3: "quota",
    4: "timed_out",
    5: "container_refused",
    6: "teardown_incomplete",
    7: "infra_error",
    EXIT_INTERRUPTED: "interrupted",
}


class Console:
    """Receives the container's lines: prints them live (table mode) and keeps them (capped)."""

    mask: Callable[[str], str] | None = None  # set by run.console_for: hides secret values

    def __init__(self, live: bool, stdout: Callable[[], TextIO], stderr: Callable[[], TextIO]) -> None:
        """The streams are looked up at every line: a progress display on a terminal may redirect
        them for a while, so the lines print above it instead of through it."""
        self.live, self._out, self._err = live, stdout, stderr
        self._lock = threading.Lock()
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.sourced: list[dict[str, str]] = []  # each kept line with where it came from, in order
        self.sources: dict[str, int] = {}  # lines by source: "stream", "log-analytics"
        self.dropped: dict[str, int] = {"stdout": 0, "stderr": 0}
        self.notes: list[str] = []
        self._chars = 0
        self.opened = time.monotonic()
        self.first_line_s: float | None = None  # from the start of the run to the first line

    def note(self, text: str) -> None:
        """What the document should say about the output itself (e.g. it could not be read)."""
        with self._lock:
            self.notes.append(text)
            if self.live:
                print(f"warning: {text}", file=self._err(), flush=True)

    def line(self, stream: str, text: str, source: str = "stream") -> None:
        """One line of the container's; `source` says where it was read (the log stream, or the
        environment's Log Analytics workspace when the stream missed it: docs/run.md)."""
        text = self.mask(text) if self.mask is not None else text  # --secret-env values: masking.py
        with self._lock:
            if self.first_line_s is None:
                self.first_line_s = round(time.monotonic() - self.opened, 3)
            self.sources[source] = self.sources.get(source, 0) + 1
            kept = self.lines[stream]
            if len(kept) < MAX_LINES and self._chars + len(text) <= MAX_CHARS:
                kept.append(text)
                self.sourced.append({"stream": stream, "text": text, "source": source})
                self._chars += len(text) + 1
            else:
                self.dropped[stream] += 1
            if self.live:
                target = self._out() if stream == "stdout" else self._err()
                print(text, file=target, flush=True)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.lines.values()) + sum(self.dropped.values())

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            doc: dict[str, Any] = {
                name: "".join(f"{line}\n" for line in lines) for name, lines in self.lines.items()
            }
            doc["lines"] = list(self.sourced)  # each line with its source, in the order delivered
            doc["sources"] = dict(self.sources)
            if self.notes:
                doc["notes"] = list(self.notes)
            if any(self.dropped.values()):
                doc["truncated"] = {
                    "note": f"capped at {MAX_LINES} lines or {MAX_CHARS} characters; later lines dropped",
                    **{f"{k}_lines_dropped": v for k, v in self.dropped.items()},
                }
            return doc


@dataclass
class WorkloadResult:
    """How the container ended: `exited` (its code is known), `refused` (it never started),
    `timeout` (stopped at --max-minutes), `stopped` (Ctrl-C), `unknown` (its end was not learnt),
    `gone` (its job was deleted under it: `env delete --force`), `unplaced` (no replica was ever
    placed, and the platform said why: no capacity, exit 3).

    `reason` and `hint` explain a refusal, or an exited container's known crash (out of memory);
    `error` is set when a refusal is acagpu's input or infrastructure rather than the image's
    (an image that could not be pulled: exit 2 or 7, not 5)."""

    status: str
    exit_code: int | None = None
    reason: str | None = None
    hint: str | None = None
    execution: str | None = None
    seconds: float = 0.0
    error: AcaGpuError | None = None
    # the platform's own account of the container (engine/phases.phases_of): how its image arrived
    # (pulled from where, cached, streamed; bytes, MB/s), scheduling, start, the GpuDriverInfo driver
    platform: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "hint": self.hint,
            "execution": self.execution,
            "seconds": round(self.seconds, 3),
        }
        if self.platform:
            doc["platform"] = dict(self.platform)
        return doc


@dataclass
class WorkloadOutcome(RunOutcome):
    """The engine's outcome with the workload's own end; the exit code follows `docker run`."""

    spec: RunSpec | None = None
    console: Console | None = None
    result: WorkloadResult | None = None
    commands: dict[str, str] = field(default_factory=dict)
    shares: dict[str, Any] | None = None  # what --create-share found and made (names, never a key)

    @property
    def container_exit(self) -> int | None:
        """The container's code when it ran and nothing of acagpu's outranks it."""
        if self.interrupted or self.error is not None or not self.teardown.clean:
            return None
        if self.result is None or self.result.status != "exited":
            return None
        return self.result.exit_code

    @property
    def refusal(self) -> AcaGpuError | None:
        """Why the container never started, when acagpu itself ended well: the image's refusal
        (exit 5), or the result's own error (an image that could not be pulled: 2 or 7)."""
        acagpu_fine = not self.interrupted and self.error is None and self.teardown.clean
        if not acagpu_fine or self.result is None or self.result.status != "refused":
            return None
        if self.result.error is not None:
            return self.result.error
        return GpuCheckFailed(
            f"the container did not start: {self.result.reason}",
            code="ContainerRefused",
            hint=self.result.hint,
        )

    @property
    def exit_code(self) -> int:
        code = self.container_exit
        if code is not None:
            return code
        refused = self.refusal
        return refused.exit_code if refused is not None else super().exit_code

    @property
    def status(self) -> str:
        code = self.container_exit
        if code is not None:
            return "ok" if code == 0 else "container_failed"
        return STATUS_BY_EXIT.get(self.exit_code, "failed")

    def failure(self) -> AcaGpuError | None:
        if self.container_exit is not None:
            return None  # the container's own failure is its output and its code, not acagpu's error
        return self.refusal or super().failure()

    def cost(self) -> dict[str, Any]:
        """The measured replica lifetime at the replica's own price (its --cpu/--memory meters)."""
        if self.spec is None or self.spec.local:
            return {
                "gpu_seconds": 0.0,
                "usd_estimate": 0.0,
                "basis": "this machine's own GPUs: nothing billed",
            }
        profile = self.plan.pairs[0].profile
        per_second, basis = replica_price(
            profile, self.spec.workload.cpu, self.spec.workload.memory_gib, self.plan.location
        )
        return {
            # as measured: the text shows tenths and cents (units.py), the one rounding
            "gpu_seconds": round(self.gpu_seconds * profile.gpu_count, 3),
            "replica_seconds": round(self.gpu_seconds, 3),
            "usd_estimate": round(per_second * self.gpu_seconds, 8),
            "basis": f"estimate: measured replica lifetime x ({basis})",
            **lifetime.summary(self.gpu_lives),
        }

    def cap_summary(self) -> tuple[str, str, str | None]:
        """--max-cost stopped the container: it ran until the cap, its command did not finish."""
        return ("the container ran until the cap", "its command did not finish (stopped)", None)

    def document(self) -> dict[str, Any]:
        assert self.spec is not None
        error = self.failure()
        code = self.exit_code
        doc: dict[str, Any] = {
            "schema": 1,
            "command": "run",
            "run_id": self.plan.run_id,
            "status": self.status,
            "exit_code": code,
            "exit_code_from": "container" if self.container_exit is not None else "acagpu",
            **self.spec.as_dict(),
            "container": self.result.as_dict() if self.result else {"status": "not-started"},
            "output": self.console.as_dict() if self.console else {"stdout": "", "stderr": ""},
            "phases": dict(self.phases),
            "timings": {
                **self.timings,
                "time_to_first_line_s": self.console.first_line_s if self.console else None,
            },
            "cost": self.cost(),
            "teardown": self.teardown.as_dict(),
            "attempts": [] if self.spec.local else [a.as_dict() for a in self.attempts],
            "error": error.as_dict() if error is not None else None,
        }
        if self.capacity_wait is not None:
            doc["capacity_wait"] = self.capacity_wait
        if self.cost_cap is not None:
            doc["cost_cap"] = self.cost_cap
        if self.commands:
            doc["commands"] = dict(self.commands)
        if self.shares is not None:
            doc["shares"] = dict(self.shares)
        return doc


def render_run(doc: dict[str, Any]) -> str:
    """The closing lines on stderr (stdout carries only the container's own output)."""
    container = doc.get("container") or {}
    cost = doc.get("cost") or {}
    where = doc.get("location")
    lines = [f"run {doc['run_id']} on {doc['runtime']}" + (f" ({where})" if where != "local" else "")]
    if container.get("status") == "exited":  # with the known crash and what to do, in one line
        why = "; ".join(filter(None, (container.get("reason"), container.get("hint"))))
        lines.append(
            f"  container exited with code {container.get('exit_code')}" + (f": {why}" if why else "")
        )
    elif container.get("status") == "refused" and doc.get("error"):
        lines.append("  container refused: it never started (the error below says why)")  # once, not twice
    elif container.get("reason"):
        lines.append(f"  container {container.get('status')}: {container.get('reason')}")
    pull = (container.get("platform") or {}).get("image_pull")
    if doc.get("runtime") == "aca" and (pull or container.get("status") in ("exited", "timeout", "stopped")):
        lines.append(f"  image          {arrival_text(pull, (doc.get('workload') or {}).get('image'))}")
    usd = cost.get("usd_estimate")
    if isinstance(usd, int | float) and doc.get("runtime") == "aca":
        lines.append(
            f"  cost           {gpu_seconds_text(cost.get('gpu_seconds') or 0)}, ≈ {usd_text(usd)} (estimate)"
        )
        said = quality_text(cost)  # a figure faults spoiled says so
        if said:
            lines.append(f"                 {said}")
    teardown = doc.get("teardown") or {}
    if doc.get("runtime") == "aca":
        lines.append(f"  teardown       {teardown.get('status')}")
    ran = container.get("status") in ("exited", "timeout", "stopped")
    for mount in (doc.get("workload") or {}).get("mounts", []) if ran else []:  # where the outputs went
        where = "environment storage" if doc.get("runtime") == "aca" else "folder"
        lines.append(f"  files in {mount['path']} are in {where} {mount['source']}")
    return "\n".join(lines)


def render_run_markdown(doc: dict[str, Any]) -> str:
    """The job summary (`--github`): what ran, how it ended, the output's tail; never a secret."""
    container, work = doc.get("container") or {}, doc.get("workload") or {}
    ended = container.get("status")
    if ended == "exited":
        ended = f"exited with code {container.get('exit_code')}"
    cost = doc.get("cost") or {}
    rows = [
        ("status", f"{doc['status']} (exit {doc['exit_code']}, from {doc['exit_code_from']})"),
        ("where", f"{doc['runtime']} ({doc.get('location')})"),
        ("image", f"`{work.get('image')}`"),
        ("command", f"`{' '.join(work.get('command') or []) or '(image default)'}`"),
        ("container", f"{ended}" + (f": {container['reason']}" if container.get("reason") else "")),
        (
            "cost",
            f"{gpu_seconds_text(cost.get('gpu_seconds') or 0)}, ≈ {usd_text(cost.get('usd_estimate') or 0)} "
            "(estimate)",
        ),
        ("teardown", str((doc.get("teardown") or {}).get("status"))),
    ]
    if doc.get("error"):
        rows.append(("error", doc["error"]["message"]))
    lines = [f"## acagpu run — run {doc['run_id']}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows]
    tail = (doc.get("output") or {}).get("stdout", "").splitlines()[-20:]
    if tail:
        lines += [
            "",
            "<details><summary>last lines of stdout</summary>",
            "",
            "```",
            *tail,
            "```",
            "</details>",
        ]
    return "\n".join(lines) + "\n"
