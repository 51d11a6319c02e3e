"""Microsoft.App: managed environments, container apps, jobs, their LROs and auth tokens."""
