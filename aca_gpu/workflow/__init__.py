"""Orchestration: plain data in, plain data out; the only caller of aca_gpu.azure."""
