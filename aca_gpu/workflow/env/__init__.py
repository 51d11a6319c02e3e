"""Warm environments (`acagpu env`), the one home for them: finding one and the runs inside (`find.py`),
its lifecycle and `env list` (`lifecycle.py`), what `env show` reads (`detail.py`), a run that borrows
one (`warm_runtime.py`, the engine's runtime for `--env NAME`), the Azure Files shares its runs mount
(`shares.py`) and the images staged in its own registry (`staging/`)."""
