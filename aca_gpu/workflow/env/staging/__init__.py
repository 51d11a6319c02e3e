"""Staged images: an environment's own container registry, filled by ARM's import, pulled by tag
with the environment's managed identity (docs/staging.md)."""
