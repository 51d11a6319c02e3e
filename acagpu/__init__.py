"""`import acagpu`: the Python API of acagpu (the package itself is `aca_gpu`).

    import acagpu
    result = acagpu.map("ghcr.io/me/embed:1", items, command=["python", "embed.py"], env="lab")

`run` and `map` fan work out over ACA GPU job executions through the same engine as
`acagpu run --shards/--map` (docs/fanout.md); they return a typed `FanoutResult`. `map(...,
workers=P)` drains the items through a queue instead (`acagpu run --workers`, docs/queue.md): a
`QueueResult`, or with `detach=True` a `QueueRun` with `.status()`, `.wait()`, `.results()` and
`.remove()`; `QueueRun(run_id)` finds a detached run again from anywhere. `serve` is a
context manager: `with acagpu.serve(IMAGE, env="lab") as app: app.url; app.measure(3)`, the app
deleted when the block ends (docs/serve.md).
"""

from aca_gpu import __version__
from aca_gpu.errors import AcaGpuError, BadInput
from aca_gpu.workflow.fanout.api import (
    AttemptResult,
    FanoutFailed,
    FanoutResult,
    ShardResult,
    run,
)
from aca_gpu.workflow.queue.api import ItemResult, QueueFailed, QueueResult, QueueRun, QueueStatus, map
from aca_gpu.workflow.serve.api import ServedApp, serve

__all__ = [
    "AcaGpuError",
    "AttemptResult",
    "BadInput",
    "FanoutFailed",
    "FanoutResult",
    "ItemResult",
    "QueueFailed",
    "QueueResult",
    "QueueRun",
    "QueueStatus",
    "ServedApp",
    "ShardResult",
    "__version__",
    "map",
    "run",
    "serve",
]
