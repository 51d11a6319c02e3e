#!/usr/bin/env bash
# On the lent GPU host (no network, its python3 holds torch): `acagpu emulator serve --workload
# host` runs each job's command as a real process on this machine's GPU; a fan-out of 8 shards, each
# a bf16 matmul printing its TFLOP/s (matmul.py), first all 8 at once, then 4 at a time with -o json.
# The Azure SDK wheels for this Python come along in build/fanout-whl (carried: it is ignored).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  build/fanout-whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())"
rm -f /tmp/emu.env
python3 -m aca_gpu emulator serve --workload host --time-scale 0.01 --registered \
  --faults "quota:region=eastus,profile=T4,limit=8" --env-file /tmp/emu.env >"$OUT/emulator.log" 2>&1 &
emu=$!
for _ in $(seq 1 100); do [ -s /tmp/emu.env ] && break; sleep 0.2; done
set -a; . /tmp/emu.env; set +a
export ACAGPU_POLLING_INTERVAL=0.2 ACAGPU_CACHE_DIR=/tmp/acagpu-cache HOME=/tmp/acagpu-home
mkdir -p "$HOME"
python3 -m aca_gpu env create gpu -l eastus --gpu t4 --yes; echo "env create exit $?"
matmul="$PWD/benchmarks/gpu-host/matmul.py"
echo "== 8 shards, 8 at once"
time python3 -m aca_gpu run --env gpu --yes --shards 8 --parallel 8 --run-id gpufan8 busybox -- python3 "$matmul" \
  2>&1 | tee "$OUT/fanout-8x8.log"; echo "run exit ${PIPESTATUS[0]}"
echo "== 8 shards, 4 at a time, -o json"
python3 -m aca_gpu run --env gpu --yes -o json --shards 8 --parallel 4 --run-id gpufan4 busybox -- python3 "$matmul" \
  >"$OUT/fanout-8x4.json" 2>"$OUT/fanout-8x4.err"; echo "run exit $?"
python3 - "$OUT/fanout-8x4.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["status"], d["exit_code"], d["summary"], d["pacing"].get("first_start_to_last_end_s"))
for s in d["shards"]:
    print(s["index"], s["status"], s["exit_code"], s["gpu_seconds"], (s.get("output_tail") or ["(no line)"])[0])
PY
python3 -m aca_gpu env delete gpu --yes >/dev/null 2>&1; kill $emu; wait $emu 2>/dev/null
exit 0
