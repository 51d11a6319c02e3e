"""Zero-build mode: run the packaged gpu-tester inside a public PyTorch image, so `up` needs no registry.

The script's source travels compressed in an environment variable and a one-line Python bootstrap
writes it to a temporary file and execs it there. Running it as a real file (rather than exec'ing
the text) keeps `torch.multiprocessing` spawn working for the multi-GPU all-reduce, and argv and the
exit code pass through unchanged. A `/bin/sh` line picks the interpreter: `python3`, else `python`
(pytorch/pytorch images have both; an image built from templates/gpu-tester/Dockerfile has its
virtualenv's), so the same container spec starts the tester in either. The datasheet peaks travel as
JSON text in `ACAGPU_PEAKS`, the same shape as acagpu's gpus.json. `ACAGPU_RESULT_GRACE_S` keeps
the finished tester alive briefly so its log can still be read. Pure: no Azure import.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aca_gpu.errors import BadInput
from aca_gpu.resources import data_path, template_path

# pytorch/pytorch images are not nvidia/cuda-based (no NVIDIA_REQUIRE_CUDA), and torch's CUDA 12.4
# wheels run on R535+ drivers through minor-version compatibility, which covers the ACA GPU fleet.
DEFAULT_TESTER_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
SRC_ENV = "ACAGPU_TESTER_SRC"
PEAKS_ENV = "ACAGPU_PEAKS"
GRACE_ENV = "ACAGPU_RESULT_GRACE_S"
# ACA removes a finished job replica, and its console log with it, soon after the container exits;
# the tester stays this long after its result line so a client that polls can still read it.
DEFAULT_RESULT_GRACE_S = 15.0
# ACA caps an env var's value well above this; staying under 32 KiB keeps room for the template body.
MAX_ENV_VALUE = 32 * 1024


def bootstrap_line(src_env: str, file_name: str) -> str:
    """The one-line Python that writes the source carried in `src_env` to a file and execs it (the
    guard's container is injected the same way)."""
    return (
        "import base64,os,sys,tempfile,zlib;"
        f'p=os.path.join(tempfile.mkdtemp(prefix="acagpu-"),"{file_name}");'
        f'open(p,"wb").write(zlib.decompress(base64.b64decode(os.environ["{src_env}"])));'
        "os.execv(sys.executable,[sys.executable,p]+sys.argv[1:])"
    )


def launch_line(bootstrap: str, no_python: str) -> str:
    """`/bin/sh -c` text that runs `bootstrap` with python3, else python, else says `no_python`.
    $0 is the name after the line (ACA's command), "$@" the script's args; the bootstrap has no
    single quote, so it sits inside one single-quoted word."""
    return (
        f'py=$(command -v python3 || command -v python) || {{ echo "{no_python}" >&2; exit 127; }}; '
        f'exec "$py" -c \'{bootstrap}\' "$@"'
    )


BOOTSTRAP = bootstrap_line(SRC_ENV, "gpu_tester.py")
LAUNCH = launch_line(BOOTSTRAP, "gpu-tester: this image has neither python3 nor python on its PATH")
LAUNCH_NAME = "gpu-tester"


@dataclass(frozen=True)
class TesterContainerSpec:
    """What a container (app or job template) needs to run the tester: image, command, args, env."""

    image: str
    command: list[str]
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "command": list(self.command),
            "args": list(self.args),
            "env": dict(self.env),
        }


def tester_script_path() -> Path:
    """The standalone tester script, from the wheel's package data or the checkout's templates/."""
    return template_path("gpu-tester", "gpu_tester.py")


def encode_source(source: bytes) -> str:
    return base64.b64encode(zlib.compress(source, 9)).decode("ascii")


def decode_source(value: str) -> bytes:
    return zlib.decompress(base64.b64decode(value))


def peaks_json(path: Path | None = None) -> str | None:
    """acagpu's datasheet table as compact JSON text, or None when the table is not there."""
    source = path or data_path("gpus.json")
    if not source.is_file():
        return None
    return json.dumps(json.loads(source.read_text(encoding="utf-8")), separators=(",", ":"))


def tester_args(*, budget: float | None = None, quick: bool = False, allow_cpu: bool = False) -> list[str]:
    """The tester's CLI arguments, validated here so a bad value fails before anything is deployed."""
    args: list[str] = []
    if budget is not None:
        if not 1 <= budget <= 86400:
            raise BadInput(f"tester budget must be between 1 and 86400 seconds, got {budget:g}")
        args += ["--budget", f"{budget:g}"]
    if quick:
        args.append("--quick")
    if allow_cpu:
        args.append("--allow-cpu")
    return args


def zero_build_container(
    image: str = DEFAULT_TESTER_IMAGE,
    args: Sequence[str] = (),
    *,
    peaks: Path | None = None,
    script: Path | None = None,
    result_grace_s: float = DEFAULT_RESULT_GRACE_S,
) -> TesterContainerSpec:
    """A container spec that runs the packaged tester in `image` with nothing built or pushed."""
    if not 0 <= result_grace_s <= 3600:
        raise BadInput(f"result grace must be between 0 and 3600 seconds, got {result_grace_s:g}")
    source = (script or tester_script_path()).read_bytes()
    env = {SRC_ENV: encode_source(source), GRACE_ENV: f"{result_grace_s:g}"}
    table = peaks_json(peaks)
    if table is not None:
        env[PEAKS_ENV] = table
    for name, value in env.items():
        if len(value.encode("utf-8")) > MAX_ENV_VALUE:
            raise BadInput(
                f"{name} would be {len(value)} bytes, over the {MAX_ENV_VALUE}-byte limit kept for ACA"
            )
    return TesterContainerSpec(
        image=image, command=["/bin/sh", "-c", LAUNCH, LAUNCH_NAME], args=list(args), env=env
    )
