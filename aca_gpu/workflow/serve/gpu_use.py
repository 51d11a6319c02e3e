"""Did the model use its GPU? A server that answers while its model runs on the CPU (a missing CUDA
library, a device argument left at `cpu`) looks healthy from outside and bills the GPU for nothing,
one of the startup failures ACA's troubleshooting names. So once the app has answered, `serve` reads
`nvidia-smi` inside a running replica (the GPU is the replica's own on a serverless profile): GPU
memory in use below IDLE_MIB means no process there holds a CUDA context, let alone a model.
"""

from __future__ import annotations

from typing import Any

from aca_gpu.errors import AcaGpuError
from aca_gpu.models import Cloud
from aca_gpu.output import Progress
from aca_gpu.workflow.base.context import Waiter

# a CUDA context alone takes a few hundred MiB; an idle card shows 0-4 MiB (recorded nvidia-smi outputs)
IDLE_MIB = 64
QUERY = ("nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits")
HOW = "nvidia-smi --query-gpu=memory.used in a running replica, after the app answered"
EXEC_TIMEOUT_S = 60.0


def parse_memory(text: str) -> list[tuple[int, int]]:
    """(used MiB, total MiB) per GPU from QUERY's CSV; lines that are not two numbers are skipped."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            found.append((int(parts[0]), int(parts[1])))
    return found


def gpu_use(
    cloud: Cloud, resource_group: str, app: str, waiter: Waiter, progress: Progress
) -> dict[str, Any]:
    """{checked, idle, memory_used_mib, memory_total_mib, how, note}: never raises; a look that
    cannot be made says why (`checked` false) rather than guessing."""
    from aca_gpu.workflow.engine.probe import run_exec

    doc: dict[str, Any] = {"checked": False, "idle": None, "how": HOW}
    with progress.step("GPU in use") as step:
        step.update(f"{' '.join(QUERY[:2])} in a replica of {app}")
        try:
            running = [
                r for r in cloud.list_app_replicas(resource_group, app) if r.running_state == "Running"
            ]
            if not running:  # exec would wake it: an app at zero is not looked at
                doc["note"] = "not checked: no replica running"
                step.update(doc["note"])
                return doc
            result = run_exec(cloud, resource_group, app, QUERY, waiter, timeout=EXEC_TIMEOUT_S)
        except AcaGpuError as exc:
            doc["note"] = f"not checked: {exc.message}"
            step.update(doc["note"])
            return doc
        gpus = parse_memory(result.output)
        if result.exit_code != 0 or not gpus:
            doc["note"] = (
                f"not checked: nvidia-smi answered exit {result.exit_code} with no GPU memory figures"
            )
            step.update(doc["note"])
            return doc
        used = [u for u, _ in gpus]
        doc.update(
            checked=True,
            idle=all(u < IDLE_MIB for u in used),
            memory_used_mib=used,
            memory_total_mib=[t for _, t in gpus],
        )
        step.update(f"{', '.join(f'{u} MiB' for u in used)} in use")
        if doc["idle"]:
            doc["note"] = (
                f"the app answered, but its GPU holds {max(used)} MiB (under {IDLE_MIB} MiB: no CUDA "
                "context): the model is likely running on the CPU while the GPU bills"
            )
            step.status = "fail"
            progress.warn(doc["note"])
    return doc
