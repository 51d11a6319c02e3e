"""Microsoft.OperationalInsights: Log Analytics workspaces, and the console log table they keep."""
