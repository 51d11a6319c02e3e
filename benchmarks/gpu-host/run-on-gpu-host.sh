#!/usr/bin/env bash
# On a GPU host with no container runtime (Ubuntu 24.04, root, no network): unpack the bundle,
# configure podman for root with runc + cgroupfs + vfs storage and no network (the host has no CNI
# plugins; `acagpu run` uses the runtime's default network), write a CDI spec with
# `acagpu doctor --write-cdi`, build an image from this host's own dash + glibc (nvidia-smi is not
# in it: CDI mounts it), and run the probe through `acagpu local --runtime podman`.
set -uo pipefail
# usage: run-on-gpu-host.sh [BUNDLE_DIR [SOURCE_DIR]]  (defaults: build/podman-bundle, the checkout)
cd "$(dirname "$0")/../.." 2>/dev/null || true
B=${1:-$PWD/build/podman-bundle}
SRC=${2:-$PWD}
[ -d "$B" ] || tar -C build -xzf build/podman-bundle.tar.gz
export PATH="$B/bin:$PATH" PYTHONPATH="$SRC:$B/pydeps"
mkdir -p /etc/containers /var/lib/acagpu-podman
cat >/etc/containers/containers.conf <<CONF
[containers]
default_ulimits = []
netns = "none"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
conmon_path = ["$B/bin/conmon"]
[engine.runtimes]
runc = ["$B/bin/runc"]
CONF
printf '[storage]\ndriver = "vfs"\nrunroot = "/run/acagpu-podman"\ngraphroot = "/var/lib/acagpu-podman"\n' >/etc/containers/storage.conf
printf '{"default": [{"type": "insecureAcceptAnything"}]}\n' >/etc/containers/policy.json
echo "== host"; uname -r; id -u; grep CapEff /proc/self/status; ls /dev/nvidia*; nvidia-smi -L; python3 --version; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())" 2>&1 | tail -1; podman --version; runc --version | head -1
echo "== doctor --write-cdi"; python3 -m aca_gpu doctor --write-cdi; echo "doctor exit $?"
cat /etc/cdi/acagpu-nvidia.json | head -40
echo "== image from host files"
root=$(mktemp -d); mkdir -p "$root/bin"; cp /bin/dash "$root/bin/sh"
for lib in $(ldd /bin/dash | awk '$3 ~ /^\// {print $3} $1 ~ /^\/lib/ {print $1}') \
    /lib/x86_64-linux-gnu/libm.so.6 /lib/x86_64-linux-gnu/libdl.so.2 /lib/x86_64-linux-gnu/libpthread.so.0 \
    /lib/x86_64-linux-gnu/librt.so.1; do
  mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
done
tar -C "$root" -cf /tmp/probe.tar . && podman import -q /tmp/probe.tar localhost/acagpu-probe:host
echo "== podman run without a GPU request (control)"
podman run --rm --network none localhost/acagpu-probe:host nvidia-smi; echo "exit $?"
echo "== podman run --device nvidia.com/gpu=all nvidia-smi"
time podman run --rm --network none --device nvidia.com/gpu=all localhost/acagpu-probe:host nvidia-smi; echo "exit $?"
if [ -z "${TESTER_ONLY:-}" ]; then
echo "== acagpu local --runtime podman (probe; the control without a GPU first)"
python3 -m aca_gpu local --runtime podman --image localhost/acagpu-probe:host --gpus none --no-tester; echo "local exit $?"
time python3 -m aca_gpu local --runtime podman --image localhost/acagpu-probe:host --no-tester; echo "local exit $?"
python3 -m aca_gpu local --runtime podman --image localhost/acagpu-probe:host --no-tester -o json >/tmp/local.json; echo "local exit $?"
python3 -c 'import json; d = json.load(open("/tmp/local.json")); print(d["status"], d["explorer"]["driver_version"], d["explorer"]["cuda_version"], d["explorer"]["gpus"], d["phases"])'

fi
[ -n "${PROBE_ONLY:-}" ] && exit 0
echo "== tester image: this host's python + stdlib + the libraries torch loads; the torch venv bind-mounted"
venv=$(dirname "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")")
py=$(readlink -f "$venv/bin/python3"); echo "venv $venv python $py"
troot=$(mktemp -d); mkdir -p -m 1777 "$troot/tmp"; mkdir -p "$troot/bin"; cp /bin/dash "$troot/bin/sh"
mkdir -p "$troot$(dirname "$py")"; cp "$py" "$troot$py"; mkdir -p "$troot/usr/lib"; cp -a /usr/lib/python3.12 "$troot/usr/lib/"
for lib in $( { ldd "$py" /bin/dash; find "$venv" /usr/lib/python3.12/lib-dynload \( -path '*torch/lib/*' -o -path '*numpy*' -o -path '*lib-dynload*' \) \
      -name '*.so*' -exec ldd {} \; 2>/dev/null; } | awk '$3 ~ /^\// {print $3} $1 ~ /^\/lib/ {print $1}' \
    | grep -v -e "^$venv" -e /usr/local/nvidia -e libcuda -e libnvidia | sort -u); do  # driver files come by CDI
  mkdir -p "$troot$(dirname "$lib")"; cp -L "$lib" "$troot$lib"
done
printf '#!/bin/sh\nexec %s/bin/python3 "$@"\n' "$venv" >"$troot/usr/bin/python3"  # the mounted venv's python
chmod +x "$troot/usr/bin/python3"
du -sh "$troot"; tar -C "$troot" -cf /tmp/tester.tar . && podman import -q /tmp/tester.tar localhost/acagpu-tester:host
if [ -n "${RUN_ONLY:-}" ]; then  # `acagpu run` with a user's own program, a read-only and a written mount
  here=$(cd "$(dirname "$0")" && pwd); out=$(mktemp -d)
  echo "== acagpu run with podman's default network on a host without CNI plugins (want exit 7, not 5)"
  grep -v '^netns' /etc/containers/containers.conf >/tmp/with-network.conf
  CONTAINERS_CONF=/tmp/with-network.conf python3 -m aca_gpu run --runtime podman localhost/acagpu-tester:host -- true
  echo "run exit $? (want 7)"
  echo "== acagpu run --runtime podman: nvidia-smi, then a bf16 matmul, exit code 3 passed through"
  time python3 -m aca_gpu run --runtime podman --mount "$venv:$venv:ro" --mount "$here:/job:ro" --mount "$out:/out" \
    localhost/acagpu-tester:host -- sh -c 'nvidia-smi -L && python3 /job/matmul.py /out/result.txt 3'
  echo "run exit $? (want 3)"; echo "written: $(cat "$out/result.txt")"
  python3 -m aca_gpu run --runtime podman --mount "$venv:$venv:ro" --mount "$here:/job:ro" -o json \
    localhost/acagpu-tester:host -- python3 /job/matmul.py >/tmp/run.json; echo "run -o json exit $?"
  python3 -c 'import json; d = json.load(open("/tmp/run.json")); print(json.dumps(d, indent=1)[:2500])'
  echo "== acagpu run --gpus none (control: no GPU reaches the container)"
  python3 -m aca_gpu run --runtime podman --gpus none --mount "$venv:$venv:ro" --mount "$here:/job:ro" \
    localhost/acagpu-tester:host -- python3 /job/matmul.py; echo "run exit $? (want non-zero: no CUDA)"
  exit 0
fi
echo "== the zero-build tester in a podman container with the GPU (CDI), built by aca_gpu.local"
time python3 - "$venv" <<'PY'
import json, sys
from dataclasses import replace
from aca_gpu.local.gpus import parse_gpus
from aca_gpu.local.probe import LocalTarget
from aca_gpu.local.runner import run_container
from aca_gpu.tester import zero_build_container
from aca_gpu.workflow.local.runtime import tester_facts
venv = sys.argv[1]
spec = zero_build_container("localhost/acagpu-tester:host", ["--quick"])
target = LocalTarget("podman", "podman", parse_gpus("all"), run_id="gpu")
cmd = target.command(spec.image, [*spec.command, *spec.args], role="tester", env=spec.env)
at = cmd.argv.index(spec.image)  # the torch venv is data here, mounted read-only at its own path
cmd = replace(cmd, argv=[*cmd.argv[:at], "-v", f"{venv}:{venv}:ro", *cmd.argv[at:]])
print(cmd.display()[:400])
run = run_container(cmd, timeout=400)
facts = tester_facts(run)
print("exit", run.exit_code, "seconds", round(run.seconds, 1), "refused", run.refused)
print("stderr tail:", run.stderr[-1500:])
print(json.dumps(facts.as_dict(), indent=1)[:3000])
PY
