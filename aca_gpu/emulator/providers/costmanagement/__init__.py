"""Microsoft.CostManagement: the `query` subset acagpu asks for its runs' actual cost."""
