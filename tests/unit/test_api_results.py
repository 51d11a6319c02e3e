"""The Python API's results share one run-level half (workflow/base/api.py): each mode raises its own
error with its own default code, and both read a document's cost and name their money alike."""

from __future__ import annotations

from typing import Any

import pytest

from aca_gpu.errors import AcaGpuError
from aca_gpu.workflow.base.api import container_fields, item_texts
from aca_gpu.workflow.fanout.api import FanoutFailed, _result
from aca_gpu.workflow.queue.api import QueueFailed, result_of

COST = {"usd_estimate": 0.0022, "gpu_seconds": 0.4}
FAILED: dict[str, Any] = {"run_id": "r1", "status": "failed", "exit_code": 1, "cost": COST}


@pytest.mark.parametrize(("read", "failure", "code"), [(_result, FanoutFailed, "ShardsFailed"),
                                                       (result_of, QueueFailed, "ItemsFailed")])  # fmt: skip
def test_each_mode_raises_its_own_error_with_the_clis_exit_code(
    read: Any, failure: type[AcaGpuError], code: str
) -> None:
    result = read(FAILED)
    assert (result.ok, result.cost_text, result.gpu_seconds_text) == (False, "$0.0022", "0.4 GPU-seconds")
    with pytest.raises(failure, match="run r1 failed") as raised:
        result.raise_for_failures()
    assert (raised.value.code, raised.value.exit_code) == (code, 1)
    named = read(FAILED | {"error": {"message": "2 of 3 failed", "code": "Custom"}})
    with pytest.raises(failure, match="2 of 3 failed") as raised:
        named.raise_for_failures()
    assert raised.value.code == "Custom"
    ok = read({"run_id": "r2", "status": "ok", "exit_code": 0})  # no cost block: zero
    assert ok.raise_for_failures() is ok and (ok.cost_usd, ok.gpu_seconds) == (0.0, 0.0)


def test_items_and_container_options_as_the_cli_spells_them() -> None:
    assert item_texts(["a.txt", {"k": 1}, 3]) == ("a.txt", '{"k":1}', "3")
    fields = container_fields("img", ["python", "x.py"], env="lab", env_vars={"A": "1", "B": "x=y"},
                              secret_env=["TOKEN"], mounts=["data:/data"])  # fmt: skip
    assert fields == {"image": "img", "command": ("python", "x.py"), "env": ("A=1", "B=x=y"),
                      "secret_env": ("TOKEN",), "mounts": ("data:/data",), "env_name": "lab",
                      "cpu": None, "memory": None}  # fmt: skip
