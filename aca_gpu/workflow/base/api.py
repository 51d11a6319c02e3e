"""What the Python API's entry points share (`acagpu.run`/`map`, queue mode, `acagpu.serve`): the
run results' run-level half (FanoutResult, QueueResult), the one `raise_for_failures` that turns a
failed run into the CLI's error and exit code, and the container options spelled as the CLI parses them.

Fan-out and queue mode differ in their parts (shards with attempts, items with deliveries), not in
what a caller asks of the run as a whole: did it succeed, what did it cost, as acagpu prints money
everywhere. Keeping that here keeps the two from drifting apart (a cost read one way in one mode and
another way in the other). The items a caller passes are made text here too, by the one rule both
modes give `ACAGPU_ITEM`, and the options every entry point takes for the container become the
fields the CLI's flags fill (`env_vars` as `-e KEY=VALUE`), so the API builds the CLI's own request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from aca_gpu.errors import AcaGpuError
from aca_gpu.units import gpu_seconds_text, usd_text


class RunResult:
    """The run-level half of a typed result; a frozen dataclass subclass declares the fields (in its
    own order) and names its error class and the code used when the document names none."""

    run_id: str
    exit_code: int
    cost_usd: float
    gpu_seconds: float
    error: dict[str, Any] | None

    failure: ClassVar[type[AcaGpuError]]
    failure_code: ClassVar[str]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def cost_text(self) -> str:
        """`cost_usd` as the CLI prints it (`$0.03`; four decimals below a cent, so a few
        GPU-seconds do not read as `$0.00`): a script need not format money itself."""
        return usd_text(self.cost_usd)

    @property
    def gpu_seconds_text(self) -> str:
        """`gpu_seconds` as the CLI prints it: `0.4 GPU-seconds`, `230 GPU-seconds`."""
        return gpu_seconds_text(self.gpu_seconds)

    def raise_for_failures(self) -> Self:
        """Self when the run succeeded; else its error (the document's message and code, the CLI's
        exit code), so `result = acagpu.map(...).raise_for_failures()` reads as one step."""
        if not self.ok:
            message = (self.error or {}).get("message") or f"run {self.run_id} failed"
            error = self.failure(str(message), code=str((self.error or {}).get("code") or self.failure_code))
            error.exit_code = self.exit_code
            raise error
        return self


def run_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The RunResult fields of an outcome document (the run's `cost` block may be absent: zero)."""
    cost = doc.get("cost") or {}
    return {
        "run_id": str(doc["run_id"]),
        "status": str(doc["status"]),
        "exit_code": int(doc["exit_code"]),
        "cost_usd": float(cost.get("usd_estimate") or 0.0),
        "gpu_seconds": float(cost.get("gpu_seconds") or 0.0),
        "error": doc.get("error"),
        "document": doc,
    }


def item_texts(items: Iterable[Any]) -> tuple[str, ...]:
    """Each item as its shard or worker reads it from `ACAGPU_ITEM`: a string as it is, anything
    else as compact JSON (as a line of a `--map` file would hold it)."""
    return tuple(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for v in items)


def container_fields(
    image: str,
    command: Sequence[str],
    *,
    env: str | None,
    env_vars: Mapping[str, str] | None,
    secret_env: Sequence[str],
    mounts: Sequence[str],
    cpu: float | None = None,
    memory: str | None = None,
) -> dict[str, Any]:
    """The request fields (RunRequest, ServeRequest) of the container options the entry points take:
    `env_vars` as `-e KEY=VALUE`s, `env` the warm environment's name (`--env`), None for a size the
    profile's replica gives."""
    return {
        "image": image,
        "command": tuple(command),
        "env": tuple(f"{k}={v}" for k, v in (env_vars or {}).items()),
        "secret_env": tuple(secret_env),
        "mounts": tuple(mounts),
        "env_name": env,
        "cpu": cpu,
        "memory": memory,
    }
