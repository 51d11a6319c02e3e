"""Pure GPU knowledge: nvidia-smi parsing, CUDA compatibility, tester results, profile catalog."""
