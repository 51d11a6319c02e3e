"""What runs cost: the one spend figure of a live run (`so_far`), the record of each finished run's
estimate (`ledger`), and that estimate set beside Azure's bill (`report`). docs/costs.md says how
prices, estimates, the spend figure, the tolerance and the bill relate."""

from aca_gpu.workflow.spend.so_far import RunSpend, run_spend, tagged_profile

__all__ = ["RunSpend", "run_spend", "tagged_profile"]
