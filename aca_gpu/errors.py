"""Error types that carry their exit code, so the CLI maps failures to the documented contract once.

Exit codes (docs/exit-codes.md): 0 ok · 1 unexpected failure · 2 bad input / preflight refused ·
3 quota or capacity · 4 timed out waiting · 5 GPU, driver or image failed · 6 teardown incomplete ·
7 infrastructure (a connection or a result was lost; the GPU was not judged) · 8 --max-cost reached
(what ran was stopped) · 130 interrupted.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_QUOTA = 3
EXIT_TIMEOUT = 4
EXIT_GPU_CHECK = 5
EXIT_TEARDOWN = 6
EXIT_INFRA = 7
EXIT_COST_CAP = 8
EXIT_INTERRUPTED = 130


class AcaGpuError(Exception):
    """Base error: a one-line message for the user and the exit code it maps to."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # ARM error code or another machine-readable reason, when there is one
        self.hint = hint  # what the user can do next, shown under the message

    @property
    def kind(self) -> str:
        """The machine-readable code a document shows: ARM's or acagpu's own, else the error's
        kind (`Interrupted`, `BadInput`, ...), so `error.code` is never null for a script to test."""
        return self.code or type(self).__name__

    def as_dict(self) -> dict[str, object]:
        return {"message": self.message, "code": self.kind, "exit_code": self.exit_code, "hint": self.hint}


class BadInput(AcaGpuError):
    """A flag, file or value the user gave cannot be used; nothing was created."""

    exit_code = EXIT_BAD_INPUT


class PreflightRefused(AcaGpuError):
    """The plan cannot work (region lacks the profile, provider unregistered, image too new...)."""

    exit_code = EXIT_BAD_INPUT


class AuthError(AcaGpuError):
    """No usable credential or the credential was refused."""

    exit_code = EXIT_BAD_INPUT


class QuotaError(AcaGpuError):
    """Quota or regional capacity refused the request."""

    exit_code = EXIT_QUOTA


class WaitTimedOut(AcaGpuError):
    """A wait passed its deadline; the message says what was awaited."""

    exit_code = EXIT_TIMEOUT


class GpuCheckFailed(AcaGpuError):
    """The GPU check itself failed: incompatible driver/CUDA, NVML errors, tester fail."""

    exit_code = EXIT_GPU_CHECK


class TeardownIncomplete(AcaGpuError):
    """Something this run made is still there after teardown."""

    exit_code = EXIT_TEARDOWN


class ContainerRefused(GpuCheckFailed):
    """The container runtime refused to start the image (CUDA requirement newer than the driver, pull
    failure): the image or driver failed, so this is exit 5 like any GPU check."""


class InfraError(AcaGpuError):
    """Transport trouble lost something (an exec session, a log stream, a result line) after retries.

    Never a verdict on the GPU: exit 7 tells a script to retry rather than to blame the image.
    """

    exit_code = EXIT_INFRA


class Interrupted(AcaGpuError):
    """Ctrl-C: the run stopped on the user's request (after tearing down, unless told to leave)."""

    exit_code = EXIT_INTERRUPTED


class CloudError(AcaGpuError):
    """An Azure call failed in a way no more specific type covers."""

    exit_code = EXIT_FAILURE


class NotFound(AcaGpuError):
    """The named run or resource does not exist."""

    exit_code = EXIT_BAD_INPUT


# ARM's codes for a refused request rate (subscription, tenant or resource provider buckets)
THROTTLE_CODES = frozenset(
    {
        "429",
        "toomanyrequests",
        "subscriptionrequeststhrottled",
        "tenantrequeststhrottled",
        "resourcerequeststhrottled",
    }
)


def is_throttled(exc: AcaGpuError) -> bool:
    """True when ARM refused the call for its rate only: the same call succeeds later, never give up."""
    return (exc.code or "").lower() in THROTTLE_CODES
