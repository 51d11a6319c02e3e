"""A run's spend so far, as `status` and `reap` show it: a tenth of a GPU-second is not nothing.

`status` read a running run at 0.1 GPU-seconds as `usd_estimate: 0.0` and printed SPEND≈ `$0.00`
(four decimals of $0.000015), the very figure its container's start was meant to end.
"""

from __future__ import annotations

from aca_gpu import cost
from aca_gpu.units import usd_text
from aca_gpu.workflow.spend.so_far import RunSpend


def test_a_tenth_of_a_gpu_second_is_above_zero_in_the_document_and_the_text() -> None:
    tiny = cost.run_spend("t4", 0.1)
    assert 0 < tiny.usd < 0.00005  # four decimals would print it as zero
    spent = RunSpend("running", 0.1, None, tiny, "replica lifetimes")
    usd = spent.as_dict()["usd_estimate"]
    assert usd is not None and usd > 0, spent.as_dict()
    assert usd_text(usd) == "<$0.0001"


def test_a_figure_of_a_hundredth_cent_and_more_keeps_four_decimals() -> None:
    """Status and reap agree to the digit: what four decimals can show is rounded to them."""
    hour = RunSpend("running", 3600.0, None, cost.run_spend("t4", 3600.0), "replica lifetimes")
    assert hour.usd == round(cost.run_spend("t4", 3600.0).usd, 4)
    assert RunSpend("stopped", 0.0, None, cost.run_spend("t4", 0.0), "replica lifetimes").usd == 0.0
