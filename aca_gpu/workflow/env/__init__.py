"""Warm environments (`acagpu env`) as a feature: what `env show` reads about one (`detail.py`).

The environment's lifecycle (create, find, renew, delete) is still `workflow/envs.py`."""
