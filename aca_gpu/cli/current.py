"""The Output of the command now running, so the group can report a failure through it.

A module of its own (stdlib only) so that `acagpu --help` loads nothing more than Click.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aca_gpu.output import Output

EXIT_INTERRUPTED = 130  # errors.py's table: Ctrl-C or a declined prompt

CURRENT_OUTPUT: ContextVar[Output | None] = ContextVar("acagpu_output", default=None)
