"""Known failures of the user's container, each in one line with what to do (local runtimes and ACA).

A container that never started is `refusal`: an image that could not be pulled is the same
`ImagePullFailed` as `acagpu local` (`workflow/local/runtime.py:image_pull_error`): exit 2, because the
image as the user named it cannot be had (no such name or tag, no access: the input is wrong),
or 7 when its registry could not be reached or turned the pull away for now (network, DNS,
TLS, rate limit: retry). A failure of this host's container runtime itself (its network
plugins missing, its engine down) is exit 7 too: nothing of the image or the GPU was tried.
Exit 5 stays for what the GPU, driver or image itself refused (a CUDA requirement newer than the
driver, a program missing from the image or built for another CPU).

A container that ran and failed at once is `crash`: its exit code stays its own (as `docker
run`), with the reason beside it: out of memory (OOMKilled when the platform says so, else exit
137 read as SIGKILL; exit 126 from a shell that could not execute a program). One exception,
`exec_refusal`: when the container's first stderr line is the runtime's own word that the
program could not be executed (`exec /app: exec format error`) and nothing reached stdout, the
program never ran, so it is a refusal (exit 5) like a missing program (126/127).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aca_gpu.errors import AcaGpuError, InfraError
from aca_gpu.gpu import runtime_errors

MAX_REASON = 300
# failures of this host's container runtime itself: exit 7 (infrastructure), never the image's 5
RUNTIME_SETUP = frozenset({runtime_errors.RUNTIME_NETWORK, runtime_errors.DOCKER_ENGINE_DOWN})
_ACA_PULL = re.compile(r"reason '(?P<reason>\w+)'.*?\berror: (?P<error>.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Explained:
    """One line: why, what to do, and the error when the refusal is acagpu's input or infrastructure."""

    reason: str
    hint: str | None = None
    error: AcaGpuError | None = None


def _pull_words(line: str) -> str:
    """ACA's pull failure as its reason and the registry's words (`ImagePullFailure: ... not found`),
    without the event's wrapping (`Container 'main' was terminated with exit code '' and ...`)."""
    match = _ACA_PULL.search(line)
    return f"{match['reason']}: {match['error']}" if match else line


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def refusal(
    image: str, said: Sequence[str], *, reasons: bool = False, fallback: str | None = None
) -> Explained:
    """Why the container never started, from what the runtime or platform `said` (lines, oldest
    first): a pull failure (its last word, with its own exit code), else the first line a known
    failure is recognised in, else `fallback` or the last line.

    With `reasons` each line is the platform's `Reason: message` (ACA's system events), and the
    reason stays before a recognised summary (`ContainerCreateFailure: the image requires ...`);
    a pull's hint is then ACA's (its registry flags), not this host's `podman login`.
    """
    from aca_gpu.workflow.local.runtime import image_pull_error  # a refusal's: not every `run` loads it

    for line in reversed(said):
        pulled = image_pull_error(image, _pull_words(line))
        if pulled is not None:
            if reasons and pulled.hint == runtime_errors.PULL_FIX:
                pulled.hint = runtime_errors.ACA_PULL_FIX
            return Explained(_one_line(pulled.message), pulled.hint, pulled)
    for line in reversed(said):  # the runtime's final error, not a warning it printed on the way
        found = runtime_errors.first(line)
        if found is not None and found.kind in RUNTIME_SETUP:  # the host's runtime, not the image
            error = InfraError(
                f"the container runtime failed: {_one_line(found.evidence)}", code="RuntimeSetup"
            )
            return Explained(found.summary, found.fix, error)
    for line in said:
        found = runtime_errors.first(line)
        if found is not None:
            reason = line.split(":", 1)[0].strip() if reasons and ":" in line else ""
            return Explained(f"{reason}: {found.summary}" if reason else found.summary, found.fix)
    last = fallback or next((line for line in reversed(said) if line.strip()), "")
    return Explained(_one_line(last) or "the container did not start and nothing said why")


def exec_refusal(stdout_lines: int, stderr: Sequence[str]) -> Explained | None:
    """The program could not be executed at all: the runtime's `exec ...: exec format error` is the
    first stderr line and nothing reached stdout (a running program that printed it is not this)."""
    first = next((line for line in stderr if line.strip()), None)
    if stdout_lines or first is None or not runtime_errors.exec_failed(first):
        return None
    found = runtime_errors.first(first)
    assert found is not None  # exec_failed lines are exec format errors
    return Explained(found.summary, found.fix)


def crash(exit_code: int | None, said: str = "") -> Explained | None:
    """Why a container that ran ended as it did, when it is known: out of memory (OOMKilled in
    `said`: the platform's events or the runtime's text; else exit 137 read as SIGKILL), or a
    shell that could not execute a program (exit 126 with an exec format error)."""
    if exit_code in (None, 0):
        return None
    kinds = {runtime_errors.OUT_OF_MEMORY} | ({runtime_errors.EXEC_FORMAT} if exit_code == 126 else set())
    found = next((f for f in runtime_errors.recognise(said) if f.kind in kinds), None)
    found = found or runtime_errors.killed(exit_code)
    return Explained(found.summary, found.fix) if found is not None else None
