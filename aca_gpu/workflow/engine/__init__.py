"""The run engine: plan, place, probe and tester per pair, teardown, one outcome.

`core.Engine` drives a `Runtime` (ACA cold or warm, or a local container runtime) through one
lifecycle; the other modules are its parts. `docs/architecture.md` draws it.
"""
