"""How long-running deletes are polled: ARM's own Retry-After when it gives one, else a first look
soon and longer pauses after.

ARM's 202 for an app or job delete carries a Location and no Retry-After (the recordings), so
azure-core waits its whole polling interval (5 s by default) before the first look: every warm
run's teardown took 5 s where the platform had finished within one second. `BackoffPolling` looks
after FIRST_LOOK_S and doubles the pause up to the polling interval, so a quick delete is seen at
once and a slow one (20-30 s on Azure) costs a handful of reads more than before, not one a second.
"""

from __future__ import annotations

from typing import Any

from azure.core.pipeline.policies import RetryPolicy
from azure.mgmt.core.polling.arm_polling import ARMPolling

FIRST_LOOK_S = 0.25


class BackoffPolling(ARMPolling):
    """ARMPolling whose pause without a Retry-After grows from FIRST_LOOK_S to `interval`."""

    def __init__(self, interval: float, **kwargs: Any) -> None:
        super().__init__(timeout=interval, **kwargs)
        self._cap = interval
        self._next = min(FIRST_LOOK_S, interval)  # never slower than the interval itself

    def _extract_delay(self) -> float:
        """azure-core's hook for the pause before the next look (its default: Retry-After, else the
        fixed polling interval)."""
        given = RetryPolicy().get_retry_after(self._pipeline_response)
        if given:
            return float(given)
        delay, self._next = self._next, min(self._next * 2, self._cap)
        return delay
