"""The engine's own commands: `up`, `test` and `validate` run the nvidia-smi probe and the gpu-tester
per (image, GPU) pair; `logs` reads their jobs; `render` draws their outcomes; `report` keeps the
compatibility matrix `validate` feeds."""
