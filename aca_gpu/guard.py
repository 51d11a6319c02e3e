"""The guard's container: the standalone reaper script (templates/guard/acagpu_guard.py) injected
into a stock Python image, the way the tester is (aca_gpu/tester.py): the source travels compressed
in an environment variable and a one-line bootstrap writes it to a file and runs it. No registry,
no build. Pure: no Azure import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aca_gpu.errors import BadInput
from aca_gpu.resources import template_path
from aca_gpu.tester import MAX_ENV_VALUE, bootstrap_line, encode_source, launch_line

DEFAULT_IMAGE = "python:3.12-slim"  # a stock image: the script needs only the standard library
SRC_ENV = "ACAGPU_GUARD_SRC"
LOG_PREFIX = "acagpu-guard"  # every line the script prints about a group starts with it
BOOTSTRAP = bootstrap_line(SRC_ENV, "acagpu_guard.py")
LAUNCH = launch_line(BOOTSTRAP, "acagpu-guard: this image has no python")
LAUNCH_NAME = "acagpu-guard"


@dataclass(frozen=True)
class GuardContainer:
    image: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def script_path() -> Path:
    return template_path("guard", "acagpu_guard.py")


def guard_container(
    settings: dict[str, str], *, image: str = DEFAULT_IMAGE, script: Path | None = None
) -> GuardContainer:
    """The container that runs one sweep; `settings` are the script's ACAGPU_* variables."""
    env = {SRC_ENV: encode_source((script or script_path()).read_bytes()), **settings}
    for name, value in env.items():
        if len(value.encode("utf-8")) > MAX_ENV_VALUE:
            raise BadInput(
                f"{name} would be {len(value)} bytes, over the {MAX_ENV_VALUE}-byte limit kept for ACA"
            )
    return GuardContainer(image=image, command=["/bin/sh", "-c", LAUNCH, LAUNCH_NAME], env=env)
