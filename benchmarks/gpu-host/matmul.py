"""A user's own GPU program for `acagpu run`: a bf16 matmul rate and a file written to a mount.

Run inside the container that `run-on-gpu-host.sh` builds (RUN_ONLY=1); it stands for what a user
brings, so it uses nothing of acagpu.
"""

import sys
import time

import torch

n, reps = 8192, 50
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(reps):
    a @ b
torch.cuda.synchronize()
rate = 2 * n**3 * reps / (time.perf_counter() - start) / 1e12
line = f"{torch.cuda.get_device_name()} bf16 {rate:.1f} TFLOP/s (torch {torch.__version__})"
print(line, flush=True)
print("a line on stderr", file=sys.stderr, flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as out:
        out.write(line + "\n")
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
