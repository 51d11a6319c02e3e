"""`up` against the emulator's host workload: the real tester runs as a real process on this machine.

Without a GPU the honest outcome is the tester's own `no-cuda` failure (exit 5) with a real CPU
baseline; on a GPU host the same path carries real TFLOP/s. Real seconds, not scaled ones, bound the
job here, and the tester's last lines (printed in a burst at exit) must reach the log stream.
"""

from __future__ import annotations

import pytest

from aca_gpu.config import load_settings
from aca_gpu.emulator.server import EmulatorServer
from aca_gpu.output import NullProgress
from aca_gpu.workflow.context import Waiter, open_cloud
from aca_gpu.workflow.plan import UpRequest, make_plan
from aca_gpu.workflow.up import up


def test_up_runs_the_real_tester_on_this_host() -> None:
    pytest.importorskip("torch")
    with EmulatorServer(time_scale=0.01, workload="host", registered=True) as emu:
        settings = load_settings(env=emu.client_env() | {"ACAGPU_POLLING_INTERVAL": "0.1"}, file={})
        plan = make_plan(settings, UpRequest(run_id="host1", max_minutes=3), owner="test")
        result = up(open_cloud(settings), plan, NullProgress(), Waiter(interval=0.1))
        tester = result.doc["tester"]["result"]
        if tester.get("gpu_count"):  # a GPU host: the whole pipeline carries real numbers
            assert result.exit_code == 0, tester
            assert tester["status"] == "pass" and not tester["simulated"]
        else:
            assert result.exit_code == 5
            assert (tester["status"], tester["reason"]) == ("fail", "no-cuda")
            assert tester["cpu_gflops"] and tester["cpu_gflops"] > 0 and tester["simulated"] is False
        assert result.doc["teardown"] == {"status": "deleted", "verified": True}
        assert emu.inventory()["empty"]
