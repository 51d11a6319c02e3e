#!/usr/bin/env bash
# On a GPU host with no container runtime (Ubuntu 24.04, root, no network): unpack the bundle,
# configure podman for root with runc + cgroupfs + vfs storage, write a CDI spec with
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
echo "== where the tester's python and torch live"
python3 -c "import sys, torch; print(sys.executable, torch.__file__)"; du -sh /usr/lib/python3.12 "$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')" 2>/dev/null
echo "== acagpu local --runtime podman"
time python3 -m aca_gpu local --runtime podman --image localhost/acagpu-probe:host --no-tester -o json; echo "local exit $?"
