"""A Slurm batch script that runs the same nvidia-smi probe through Apptainer on a GPU node.

What HPC sites document for GPU containers: request the GPU with `--gres=gpu:N` (Slurm allocates by
count, never by index), keep Apptainer's layer cache on node-local scratch rather than the quota'd
home directory, and pass `--nv` so the node's driver files are mounted in. The job prints what Slurm
allocated before the probe, so its log shows both sides.
"""

from __future__ import annotations

import shlex

from aca_gpu.errors import BadInput
from aca_gpu.local.commands import apptainer_image
from aca_gpu.local.gpus import GpuRequest

DEFAULT_CACHE = "${LOCAL_SCRATCH:-${TMPDIR:-/tmp}}/.apptainer"


def _safe(value: str, what: str) -> str:
    if not value or any(ch in value for ch in "\n\r\0"):
        raise BadInput(f"{what} must be one line, got {value!r}")
    return value


def render_sbatch(
    image: str,
    gpus: GpuRequest,
    *,
    sif: str | None = None,
    job_name: str = "acagpu-probe",
    time_limit: str = "00:15:00",
    cache_dir: str = DEFAULT_CACHE,
) -> str:
    """The script text; `cache_dir` may use shell variables (expanded on the node)."""
    if gpus.none:
        raise BadInput("--sbatch needs at least one GPU: --gpus none asks Slurm for nothing to probe")
    target = shlex.quote(_safe(apptainer_image(image, sif), "image"))
    count = gpus.slurm_count()
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={_safe(job_name, 'job name')}",
        f"#SBATCH --gres=gpu:{count}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --time={_safe(time_limit, 'time limit')}",
        "#SBATCH --output=%x-%j.out",
        "##SBATCH --account=<ACCOUNT>      # remove one # and fill in where the site requires it",
        "##SBATCH --partition=<GPU-PARTITION>",
        "set -euo pipefail",
        "",
        "# image layers go to node-local scratch, not the home directory's quota",
        f'export APPTAINER_CACHEDIR="{_safe(cache_dir, "cache directory")}"',
        'mkdir -p "$APPTAINER_CACHEDIR"',
        "module load apptainer 2>/dev/null || true",
        "",
        'echo "slurm: SLURM_JOB_GPUS=${SLURM_JOB_GPUS:-unset}'
        ' SLURM_GPUS_ON_NODE=${SLURM_GPUS_ON_NODE:-unset}"',
    ]
    if gpus.devices:
        lines.append(
            f"# asked for device={','.join(gpus.devices)}: Slurm picks which {count} GPU(s); "
            "the container sees those"
        )
    lines += [
        "# --nv mounts the node's driver libraries and nvidia-smi; without it CUDA finds no libcuda.so",
        f"apptainer exec --nv {target} nvidia-smi",
        "",
    ]
    return "\n".join(lines)
